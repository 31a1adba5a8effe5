"""A PostgreSQL server for the tests that need one, or a clear reason why they skip.

``postgres_server`` is ``$SP4RK_TEST_POSTGRES_URL`` when that is set; else a throwaway cluster
started with ``initdb``/``pg_ctl`` in a temporary folder (as the ``postgres`` user, or
``nobody``, when the tests run as root: ``initdb`` refuses root), listening on a Unix socket
only, when PostgreSQL's binaries are on ``PATH`` or in ``/usr/lib/postgresql/*/bin`` (Debian's
``postgresql`` package; CI installs it). ``postgres_url`` gives each test a schema of its own.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

POSTGRES_ENV = "SP4RK_TEST_POSTGRES_URL"


def _postgres_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return versions[-1].parent if versions else None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server's URL: the given one, or a throwaway cluster."""
    given = os.environ.get(POSTGRES_ENV)
    if given:
        yield given
        return
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install 'sp4rk[postgres]'")
    binaries = _postgres_bin()
    if binaries is None:
        pytest.skip(
            f"no PostgreSQL server: set {POSTGRES_ENV}, or install PostgreSQL "
            "(apt-get install postgresql) so that a throwaway cluster can be started"
        )
    # Not under pytest's own temporary folder: the server's user must be able to reach it.
    root = Path(tempfile.mkdtemp(prefix="sp4rk-postgres-"))
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the cluster as an unprivileged user
        user = "postgres" if _user_exists("postgres") else "nobody"
        run_as = ["runuser", "-u", user, "--"]
        shutil.chown(root, user)
    data = root / "data"
    initdb = subprocess.run(
        [*run_as, str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "sp4rk",
         "--no-sync"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if initdb.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"initdb failed, so there is no PostgreSQL server: {initdb.stderr.strip()}")
    start = subprocess.run(
        [*run_as, str(binaries / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w",
         "-o", f"-k {root} -c listen_addresses='' -c fsync=off", "start"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if start.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"pg_ctl could not start PostgreSQL: {start.stderr.strip()}")
    try:
        yield f"postgresql://sp4rk@/postgres?host={root}"
    finally:
        subprocess.run(
            [*run_as, str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A URL whose schema is this test's own (dropped afterwards)."""
    import psycopg

    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in postgres_server else "?"
    try:
        yield f"{postgres_server}{separator}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
