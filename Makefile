# One-command developer loop. Every target builds its own virtualenv, so a fresh
# machine needs only python3 (>= 3.11) and make.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# llama-cpp-python (the `local` extra) compiles from source; a native build dies with a
# general-protection fault on these CPUs, so pin the instruction sets.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

# The `local` extra compiles C++: LOCAL=auto (default) installs it when a C++ compiler works
# and says so when none does (its tests then skip, saying why); LOCAL=yes requires it (a failed
# build fails); LOCAL=no leaves it out. Everything else is installed and tested either way.
LOCAL ?= auto
# The compilers tried: $(CXX) when you set it, else c++, g++ and clang++.
CXX_CANDIDATES := $(if $(filter default,$(origin CXX)),c++ g++ clang++,$(CXX))
HAVE_CXX = ( for cxx in $(CXX_CANDIDATES); do printf 'int main() { return 0; }\n' \
  | $$cxx -x c++ -o /dev/null - >/dev/null 2>&1 && exit 0; done; exit 1 )

.PHONY: install install-local test test-matrix lint format typecheck pytest demo bench bench-stuck clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,all,ray]'
	@case "$(LOCAL)" in \
	  yes) $(MAKE) --no-print-directory install-local ;; \
	  no) echo "LOCAL=no: the 'local' extra is not installed; its tests will be skipped." ;; \
	  *) if $(HAVE_CXX); then $(MAKE) --no-print-directory install-local; else \
	       echo "NOTE: no working C++ compiler (tried $(CXX_CANDIDATES)): the 'local' extra (llama-cpp-python," \
	         "which compiles from source) is not installed, and the local-model tests will be" \
	         "skipped. Everything else is installed and tested. To add it: install g++ or" \
	         "clang++, then run 'make install-local'." >&2; fi ;; \
	esac
	touch $(STAMP)

install: $(STAMP)

## install-local: add the `local` extra (llama-cpp-python builds from source: minutes, once)
install-local:
	@test -x $(BIN)/python || { echo "run 'make install' first" >&2; exit 1; }
	@echo "installing the 'local' extra: llama-cpp-python compiles from source (minutes the first time)"
	$(BIN)/python -m pip install --quiet -e '.[local]'

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/ruff format --check src tests examples bench

format: $(STAMP)
	$(BIN)/ruff format src tests examples
	$(BIN)/ruff check --fix src tests examples

# The oldest and the newest supported Python; neither needs the `local` extra installed.
typecheck: $(STAMP)
	$(BIN)/mypy --python-version 3.11
	$(BIN)/mypy --python-version 3.13
	$(BIN)/mypy --strict --python-version 3.11 tests/typecheck
	$(BIN)/mypy --strict --python-version 3.13 tests/typecheck

pytest: $(STAMP)
	$(BIN)/pytest

## test: lint + format check + mypy --strict + the test suite
test: lint typecheck pytest

## test-matrix: the test suite on every other supported CPython found here (own virtualenvs)
test-matrix:
	PYTHON=$(PYTHON) bash .ci/python-matrix

## demo: the sp4rk command fixes a failing test (scripted model, real tools, live view), then
## shows the run. Its own light virtualenv (the cli extra only: nothing to compile).
DEMO_VENV  := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[cli]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	SP4RK=$(DEMO_VENV)/bin/sp4rk sh examples/cli-demo/run.sh .demo

BENCH_VENV  := bench/.venv
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): pyproject.toml bench/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e . -r bench/requirements.txt
	touch $(BENCH_STAMP)

## bench: executor overhead next to the Python peers (own virtualenv; see bench/README.md)
bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python bench/run.py

# openhands-sdk needs Python >= 3.12: the first 3.12 or 3.13 found (pyenv's, then on PATH).
STUCK_PYTHON ?= $(shell for v in 3.12 3.13; do for p in $$HOME/.pyenv/versions/$$v.*/bin/python3 $$(command -v python$$v); do "$$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && echo "$$p" && exit; done; done)
STUCK_VENV  := bench/.venv-stuck
STUCK_STAMP := $(STUCK_VENV)/.installed

$(STUCK_STAMP): pyproject.toml bench/stuck/requirements.txt
	@test -n "$(STUCK_PYTHON)" || { echo "bench-stuck needs Python >= 3.12 for openhands-sdk: set STUCK_PYTHON=/path/to/python3.12" >&2; exit 1; }
	$(STUCK_PYTHON) -m venv $(STUCK_VENV)
	$(STUCK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(STUCK_VENV)/bin/python -m pip install --quiet -e . -r bench/stuck/requirements.txt
	touch $(STUCK_STAMP)

## bench-stuck: stuck detection, sp4rk next to OpenHands' StuckDetector (own venv; bench/README.md)
bench-stuck: $(STUCK_STAMP)
	$(STUCK_VENV)/bin/python bench/stuck/run.py

clean:
	rm -rf $(VENV) .venv-py3.* $(BENCH_VENV) $(STUCK_VENV) $(DEMO_VENV) .demo .mypy_cache .pytest_cache .ruff_cache
