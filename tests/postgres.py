"""A real PostgreSQL on loopback for the ledger tests: one server per test session, a
database per test.

Debian's ``postgresql`` package (``make postgres`` installs it); ``initdb`` refuses to run
as root, so as root the server runs as the ``postgres`` user in a folder it owns. Tests
ask for ``postgres_url`` (a fresh, empty database's SQLAlchemy URL) or for ``ledger_url``
(parametrized: SQLite, then PostgreSQL) to run once on each.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: run `make postgres` (Debian's postgresql)")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Postgres:
    """A PostgreSQL server on 127.0.0.1 in a temporary folder, stopped at the end."""

    def __init__(self) -> None:
        self.bin = _bin()
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="gpucost-pg-"))
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, user="postgres")
        self.count = 0

    def _run(self, *args: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_root else []
        subprocess.run(
            [*prefix, *args], check=True, capture_output=True, cwd=self.root, timeout=120
        )

    def start(self) -> None:
        data = self.root / "db"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(data), "-o", options,
            "-l", str(self.root / "log"), "-w", "start",
        )  # fmt: skip

    def crash(self) -> None:
        """Stop the server at once, as a crash or a failover would (``-m immediate``)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.root / "db"), "-m", "immediate", "stop")

    def restart(self) -> None:
        """Start the server again on the same port and data after :meth:`crash`."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.root / "db"), "-o", options,
            "-l", str(self.root / "log"), "-w", "start",
        )  # fmt: skip

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.root / "db"), "-m", "fast", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def new_database(self) -> str:
        self.count += 1
        name = f"gpucost_{self.count}"
        deadline = time.monotonic() + 30
        while True:
            try:
                self._run(
                    str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                    "-U", "postgres", name,
                )  # fmt: skip
                break
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    if os.geteuid() == 0:
        pwd.getpwnam("postgres")  # the package creates this user
    server = Postgres()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres: Postgres) -> str:
    """A fresh, empty PostgreSQL database of this test's own."""
    return postgres.new_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same test on a SQLite file and on a real PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    else:
        server: Postgres = request.getfixturevalue("postgres")
        yield server.new_database()
