"""Why the local-model tests skip: one reason, worded for whoever runs ``make test``."""

LOCAL_EXTRA_MISSING = (
    "the 'local' extra (llama-cpp-python) is not installed: it compiles C++ from source, so "
    "`make install` adds it only where a C++ compiler works; install g++ or clang++, then "
    "`make install-local` (or pip install 'sp4rk[local]')"
)
