"""A mutex over one study, shared by every worker on every node.

Claiming a trial (check the budget, pop or create the trial, sample its parameters) and seeding
a study's queue must not interleave between workers, or two workers could both start the
budget's last trial or both enqueue the baseline. The lock lives where the study does:

- PostgreSQL: a session advisory lock keyed by the study name; the server drops it when the
  holder's connection closes, so a killed worker never leaves it held.
- SQLite and journal files: ``flock`` on a file next to the database (released by the kernel
  when the holder dies).
- In-memory storage: a lock of this process only.

Within a process a ``threading.Lock`` comes first, so threads do not each open a connection.
"""

from __future__ import annotations

import fcntl
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tuner.storage.resilient import Retrier
from tuner.storage.urls import backend_of, driver_url, journal_path, sqlite_path

_LOCAL: dict[tuple[str, str], threading.Lock] = {}
_LOCAL_GUARD = threading.Lock()


def advisory_key(study: str) -> int:
    """A signed 64-bit key for ``pg_advisory_lock`` from the study name."""
    digest = hashlib.sha256(f"tune-study:{study}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def lock_file(url: str) -> Path | None:
    backend = backend_of(url)
    if backend == "sqlite":
        db = sqlite_path(url)
        return db.with_name(db.name + ".tune-lock")
    if backend == "journal":
        log = journal_path(url)
        return log.with_name(log.name + ".tune-lock")  # ".lock" is optuna's own
    return None


class StudyLock:
    """``with lock.held():`` holds the study's mutex across processes and machines."""

    def __init__(self, url: str, study: str, retry: Retrier) -> None:
        self.url, self.study, self.retry = url, study, retry
        self.backend = backend_of(url)
        with _LOCAL_GUARD:
            self._local = _LOCAL.setdefault((url, study), threading.Lock())
        self._engine: Any = None

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._local:
            if self.backend == "postgresql":
                with self._advisory():
                    yield
            elif (path := lock_file(self.url)) is not None:
                with _flock(path):
                    yield
            else:
                yield

    @contextmanager
    def _advisory(self) -> Iterator[None]:
        key = advisory_key(self.study)
        conn = self.retry.call("lock study", lambda: self._lock(key))
        try:
            yield
        finally:
            try:
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({key})")
            except Exception:  # a lost connection released the lock already
                pass
            finally:
                conn.close()

    def _lock(self, key: int) -> Any:
        import sqlalchemy

        if self._engine is None:
            self._engine = sqlalchemy.create_engine(
                driver_url(self.url),
                poolclass=sqlalchemy.pool.NullPool,
                connect_args={"connect_timeout": 10},
            )
        conn = self._engine.connect()
        try:
            conn.exec_driver_sql(f"SELECT pg_advisory_lock({key})")
        except BaseException:
            conn.close()
            raise
        return conn


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
