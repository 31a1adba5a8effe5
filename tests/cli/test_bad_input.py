"""Bad input: each a one-line error that says what to do, exit 2 or 1, nothing lost."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from sp4rk.cli import main
from sp4rk.store import SCHEMA_VERSION, SQLiteRunStore
from tests.cli.helpers import events, finish, write_script


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
def script(tmp_path: Path) -> Path:
    return write_script(tmp_path / "s.json", [finish()])


def sp4rk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    err = capsys.readouterr().err
    return code, err


def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("sp4rk: error: ")
    return lines[0]


def test_unknown_model_is_a_usage_error_naming_the_forms(
    capsys: pytest.CaptureFixture[str], ws: Path, tmp_path: Path
) -> None:
    code, err = sp4rk(
        capsys, "run", "x", "-w", str(ws), "--model", "gpt4", "--store", str(tmp_path / "r.db")
    )
    assert code == 2
    assert "provider:model" in one_line_error(err)
    assert not (tmp_path / "r.db").exists()  # nothing was started


def test_missing_key_names_the_variable(
    capsys: pytest.CaptureFixture[str], ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    code, err = sp4rk(
        capsys,
        "run",
        "x",
        "-w",
        str(ws),
        "--model",
        "anthropic:claude-sonnet-4-5",
        "--store",
        str(tmp_path / "r.db"),
    )
    assert code == 1
    line = one_line_error(err)
    assert "set ANTHROPIC_API_KEY" in line and "api_key=" not in line  # the command's words


def test_a_compatible_model_without_a_server_names_the_flag(
    capsys: pytest.CaptureFixture[str], ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_COMPATIBLE_BASE_URL", raising=False)
    store = str(tmp_path / "r.db")
    code, err = sp4rk(
        capsys, "run", "x", "-w", str(ws), "--model", "openai-compatible:m", "--store", store
    )
    assert code == 1
    assert "pass --base-url URL or set OPENAI_COMPATIBLE_BASE_URL" in one_line_error(err)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("model = [", "is not valid TOML"),
        ('modle = "local"', "unknown key 'modle'"),
        ('approve = "sometimes"', "approve must be one of ask, auto, never"),
        ("max_steps = 0", "max_steps must be at least 1"),
        ('system = "missing.md"', "cannot read the system prompt"),
        ("[mcp.docs]\ncomand = 'x'", "mcp.docs: unknown key 'comand'"),
    ],
)
def test_unreadable_configuration_is_reported_with_the_fix(
    capsys: pytest.CaptureFixture[str], ws: Path, script: Path, config: str, expected: str
) -> None:
    (ws / "sp4rk.toml").write_text(config)
    code, err = sp4rk(
        capsys,
        "run",
        "x",
        "-w",
        str(ws),
        "--model",
        f"scripted:{script}",
        "--store",
        str(ws.parent / "r.db"),
    )
    assert code == 1
    assert expected in one_line_error(err)


def test_a_workspace_that_does_not_exist(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, script: Path
) -> None:
    code, err = sp4rk(
        capsys,
        "run",
        "x",
        "-w",
        str(tmp_path / "nope"),
        "--model",
        f"scripted:{script}",
        "--store",
        str(tmp_path / "r.db"),
    )
    assert code == 2
    assert "--workspace DIR" in one_line_error(err)


@pytest.mark.parametrize("command", ["show", "resume"])
def test_a_run_id_that_does_not_exist(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    code, err = sp4rk(capsys, command, "deadbeef", "--store", str(tmp_path / "r.db"))
    assert code == 2
    assert "sp4rk runs" in one_line_error(err)


def test_json_mode_reports_errors_as_an_event_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    capsys.readouterr()
    assert main(["show", "deadbeef", "--json", "--store", str(tmp_path / "r.db")]) == 2
    out = capsys.readouterr().out
    assert events(out)[-1]["event"] == "error"


def test_a_corrupt_store_is_reported_and_left_as_it_was(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ws: Path, script: Path
) -> None:
    store = tmp_path / "runs.db"
    store.write_bytes(b"garbage" * 1000)
    for args in (["runs"], ["run", "x", "-w", str(ws), "--model", f"scripted:{script}"]):
        code, err = sp4rk(capsys, *args, "--store", str(store))
        assert code == 1
        assert "move it aside" in one_line_error(err)
    assert store.read_bytes() == b"garbage" * 1000


def test_a_store_from_a_newer_version_is_refused_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = tmp_path / "runs.db"
    with SQLiteRunStore(store) as opened:
        run_id = opened.create_run(task="kept", workspace="/", model="m", settings={}).id
    db = sqlite3.connect(store)
    db.execute("UPDATE sp4rk_schema SET version = ?", (SCHEMA_VERSION + 5,))
    db.commit()
    db.close()
    code, err = sp4rk(capsys, "show", run_id, "--store", str(store))
    assert code == 1
    assert "upgrade sp4rk" in one_line_error(err)
    db = sqlite3.connect(store)
    assert db.execute("SELECT task FROM runs").fetchall() == [("kept",)]


def test_a_locked_store_says_to_try_again(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    ws: Path,
    script: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = tmp_path / "runs.db"
    SQLiteRunStore(store).close()
    monkeypatch.setenv("SP4RK_STORE_TIMEOUT", "0.05")
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code, err = sp4rk(
            capsys,
            "run",
            "x",
            "-w",
            str(ws),
            "--model",
            f"scripted:{script}",
            "--store",
            str(store),
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 1
    assert "locked by another process" in one_line_error(err)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "is not valid JSON"),
        ("[]", "non-empty JSON list"),
        (json.dumps([{"content": 3}]), "content must be a string"),
        (json.dumps([{"tool_calls": [{"nam": "x"}]}]), "each tool call is"),
    ],
)
def test_a_bad_script_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ws: Path, content: str, expected: str
) -> None:
    (tmp_path / "bad.json").write_text(content)
    code, err = sp4rk(
        capsys,
        "run",
        "x",
        "-w",
        str(ws),
        "--model",
        f"scripted:{tmp_path / 'bad.json'}",
        "--store",
        str(tmp_path / "r.db"),
    )
    assert code == 2
    assert expected in one_line_error(err)


def test_other_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ws: Path, script: Path
) -> None:
    store = str(tmp_path / "r.db")
    model = f"scripted:{script}"
    code, err = sp4rk(capsys, "run", "  ", "-w", str(ws), "--model", model, "--store", store)
    assert code == 2 and "the task is empty" in one_line_error(err)
    code, err = sp4rk(
        capsys,
        "run",
        "x",
        "-w",
        str(ws),
        "--model",
        model,
        "--system",
        str(tmp_path / "none.md"),
        "--store",
        store,
    )
    assert code == 2 and "cannot read the system prompt" in one_line_error(err)
    code, _ = sp4rk(capsys, "run", "x", "--approve", "maybe")
    assert code == 2
    assert main(["run", "x", "-w", str(ws), "--model", model, "--store", store]) == 0
    code, err = sp4rk(capsys, "resume", "last", "--store", store)
    assert code == 2 and "already finished" in one_line_error(err)


@pytest.mark.parametrize("command", ["runs", "show"])
def test_reading_a_store_that_does_not_exist_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    missing = tmp_path / "nowhere" / "runs.db"
    code, err = sp4rk(capsys, command, "--store", str(missing))
    assert code == 2
    assert f"no runs store at {missing}" in one_line_error(err)
    assert not (tmp_path / "nowhere").exists()


def test_runs_without_any_store_yet_says_so_and_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SP4RK_STORE", str(tmp_path / "state" / "runs.db"))
    capsys.readouterr()
    assert main(["runs"]) == 0
    assert "no runs yet" in capsys.readouterr().out
    assert not (tmp_path / "state").exists()
