"""A PostgreSQL server for the tests that write to one: Debian's (``apt-get install
postgresql``), started once a test session on a free loopback port with a data folder of
its own, and stopped at the end. Where its binaries are missing the tests are skipped,
saying so; CI sets ``FLOWC_POSTGRES_REQUIRED=1``, which makes that a failure. The
fixture ``postgres`` is registered in tests/conftest.py."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REQUIRED = os.environ.get("FLOWC_POSTGRES_REQUIRED") == "1"


def _server_binaries() -> Path | None:
    found = shutil.which("pg_config")
    if found is not None:
        bindir = subprocess.run(
            [found, "--bindir"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if (Path(bindir) / "initdb").exists():
            return Path(bindir)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def postgres() -> Iterator[dict[str, Any]]:
    """A PostgreSQL server of this test session: connection settings of database 'flowc'."""
    bindir = _server_binaries()
    if bindir is None:
        message = "PostgreSQL's server is not installed (Debian: apt-get install postgresql)"
        if REQUIRED:
            pytest.fail(f"FLOWC_POSTGRES_REQUIRED=1 but {message}")
        pytest.skip(message)
    folder = Path(tempfile.mkdtemp(prefix="flowc-postgres-"))
    data = folder / "data"
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root: run it as 'postgres'
        owner = pwd.getpwnam("postgres")
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()

    def run(*command: str) -> None:
        done = subprocess.run(
            [*as_user, *command], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr

    run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w",
        "start")  # fmt: skip
    try:
        import psycopg

        settings = {"host": "127.0.0.1", "port": port, "user": "postgres"}
        with psycopg.connect(**settings, dbname="postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE flowc")
        yield {**settings, "dbname": "flowc"}
    finally:
        run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)
