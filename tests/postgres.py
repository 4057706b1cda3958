"""A throwaway PostgreSQL 15 cluster for the tests that need one, run as the ``postgres`` user.

The ``postgres`` fixture (registered in ``tests/conftest.py``, one cluster per session) skips
with the reason when the server binaries or root are missing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_BIN = Path(os.environ.get("TUNE_PG_BIN", "/usr/lib/postgresql/15/bin"))


@dataclass
class Postgres:
    """A cluster on 127.0.0.1:``port`` with trust auth; ``restart`` simulates an outage."""

    root: Path
    port: int

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, db: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def pg_ctl(self, *args: str) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        cmd = [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-o", options]
        cmd += ["-l", str(self.root / "server.log"), *args]
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *cmd], check=True, timeout=60, capture_output=True
        )

    def start(self) -> None:
        self.pg_ctl("-w", "start")

    def stop(self) -> None:
        self.pg_ctl("-m", "fast", "-w", "stop")

    def create_db(self, name: str) -> str:
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        conn.close()
        return self.url(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    if not (PG_BIN / "initdb").exists() or shutil.which("runuser") is None:
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN}")
    if os.geteuid() != 0:
        pytest.skip("starting a throwaway cluster as the postgres user needs root")
    root = Path(tempfile.mkdtemp(prefix="tune-pg-"))
    shutil.chown(root, "postgres", "postgres")
    (root / "data").mkdir()
    shutil.chown(root / "data", "postgres", "postgres")
    initdb = [str(PG_BIN / "initdb"), "-D", str(root / "data"), "-A", "trust", "-U", "postgres"]
    subprocess.run(
        ["runuser", "-u", "postgres", "--", *initdb], check=True, timeout=120, capture_output=True
    )
    server = Postgres(root, _free_port())
    server.start()
    try:
        yield server
    finally:
        try:
            server.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)
