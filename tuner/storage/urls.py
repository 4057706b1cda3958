"""Storage URLs -> Optuna storages that survive database outages and detect dead workers.

Backends, by URL:

- ``sqlite:///path/study.db`` (the default, in the study's results folder): zero set-up, one
  machine. Several processes can share it, but SQLite serialises writers; prefer a journal file
  or PostgreSQL when several workers share a study.
- ``journal:PATH`` (``journal:///abs/path.log``): Optuna's append-only journal file, one machine
  (or a file system with working locks); safe for several processes.
- ``postgresql://user@host:port/db``: several machines, each running ``tune worker``.

Every storage comes wrapped in ``ResilientStorage``: a call that fails because the database is
unreachable (server restarting, network gone) waits and retries with backoff for up to
``outage_s`` instead of killing the worker. Every storage also gets heartbeats: a running
trial's worker records one every ``heartbeat_s``; a trial without one for ``grace_s`` belongs
to a dead worker (killed, node lost) and is failed and re-queued by whichever worker notices.
RDB storages keep heartbeats in the database; journal files keep them as files in a folder
next to the journal, rewritten at every beat and judged by their changing, never by a clock.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy.exc
from optuna.storages import BaseStorage, InMemoryStorage, RDBStorage
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import TrialState

from tuner.errors import StudyError
from tuner.secret_policy import scrub_url
from tuner.storage.resilient import ResilientStorage, Retrier

StaleCallback = Callable[[optuna.Study, optuna.trial.FrozenTrial], None]
_log = logging.getLogger("tuner.storage.urls")
SCHEMA_ATTEMPTS = 5  # opens of a new database racing another process's schema creation


@dataclass(frozen=True)
class StorageSettings:
    """How workers use a storage: heartbeats, dead-worker grace and outage allowance."""

    heartbeat_s: int = 30
    grace_s: int = 180
    outage_s: float = 1800.0

    def __post_init__(self) -> None:
        if self.heartbeat_s < 1:
            raise StudyError(f"--heartbeat must be at least 1 second (got {self.heartbeat_s})")
        if self.grace_s <= self.heartbeat_s:
            raise StudyError(
                f"--grace ({self.grace_s}s) must exceed --heartbeat ({self.heartbeat_s}s): a "
                "live worker would otherwise be taken for dead"
            )


def backend_of(url: str) -> str:
    """``sqlite``, ``journal``, ``postgresql`` or ``memory``; others are refused."""
    if url.startswith("journal:"):
        return "journal"
    if url in ("", "memory", ":memory:") or url == "sqlite:///:memory:":
        return "memory"
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme in ("sqlite", "postgresql", "postgres"):
        return "postgresql" if scheme == "postgres" else scheme
    raise StudyError(
        f"--storage {url!r}: unknown storage; use sqlite:///PATH (one machine), journal:PATH "
        "(one machine, several processes) or postgresql://USER@HOST:PORT/DB (several machines)"
    )


def driver_url(url: str) -> str:
    """``url`` with an installed PostgreSQL driver named: SQLAlchemy 2.1 picks psycopg 3 for a
    bare ``postgresql://``, while psycopg2 is what is commonly installed."""
    scheme, sep, rest = url.partition("://")
    if scheme not in ("postgresql", "postgres") or not sep:
        return url
    import importlib.util

    driver = "psycopg" if importlib.util.find_spec("psycopg") else "psycopg2"
    return f"postgresql+{driver}://{rest}"


def journal_path(url: str) -> Path:
    """The file of a ``journal:`` URL (``journal:rel/path`` or ``journal:///abs/path``)."""
    rest = url.removeprefix("journal:")
    if rest.startswith("//"):
        rest = rest[2:]
    if not rest:
        raise StudyError(f"--storage {url!r}: a journal URL needs a file, e.g. journal:study.log")
    return Path(rest)


def sqlite_path(url: str) -> Path:
    return Path(url.split(":///", 1)[1])


def shared_by_processes(url: str) -> bool:
    """Whether several processes can share a study through ``url``."""
    return backend_of(url) != "memory"


def open_storage(
    url: str,
    settings: StorageSettings | None = None,
    on_stale: StaleCallback | None = None,
    report: Callable[[str], None] | None = None,
) -> ResilientStorage:
    """The storage behind ``url`` with heartbeats and retries (see the module docstring)."""
    settings = settings or StorageSettings()
    where = str(sqlite_path(url)) if backend_of(url) == "sqlite" else redact(url)
    retry = Retrier(settings.outage_s, report or _log.warning, where)
    inner = retry.call(f"open {redact(url)}", lambda: _open_inner(url, settings, on_stale))
    return ResilientStorage(
        inner, retry, settings.grace_s, _heartbeat_of(url, inner, settings, on_stale)
    )


def _open_inner(url: str, settings: StorageSettings, on_stale: StaleCallback | None) -> BaseStorage:
    backend = backend_of(url)
    if backend == "memory":
        return InMemoryStorage()
    if backend == "journal":
        path = journal_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    if backend == "sqlite":
        sqlite_path(url).parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # heartbeats are 'experimental' in optuna, and relied on here
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return _rdb_with_schema(url, settings, backend, on_stale)


def _rdb_with_schema(
    url: str, settings: StorageSettings, backend: str, on_stale: StaleCallback | None
) -> RDBStorage:
    """The RDB storage, its schema created by whichever process gets there first.

    Two runs starting on a new database both create the tables and both insert the schema's
    version; the second insert breaks a unique constraint (a duplicate table, on PostgreSQL).
    By then the other run has committed the schema whole, so opening it again succeeds."""
    for attempt in range(1, SCHEMA_ATTEMPTS):
        try:
            return _rdb(url, settings, backend, on_stale)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            time.sleep(0.2 * attempt)
    return _rdb(url, settings, backend, on_stale)  # the last attempt raises what it meets


def _rdb(
    url: str, settings: StorageSettings, backend: str, on_stale: StaleCallback | None
) -> RDBStorage:
    return RDBStorage(
        driver_url(url),
        engine_kwargs=_engine_kwargs(backend),
        heartbeat_interval=settings.heartbeat_s,
        grace_period=settings.grace_s,
        heartbeat_stale_trial_callback=on_stale,
    )


def _engine_kwargs(backend: str) -> dict[str, Any]:
    if backend == "sqlite":
        # Wait for another process's write instead of failing with 'database is locked'.
        return {"connect_args": {"timeout": 60}}
    # pre_ping swaps a pooled connection the server closed (restart) for a fresh one.
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if backend == "postgresql":
        kwargs["connect_args"] = {"connect_timeout": 10}
    return kwargs


def _heartbeat_of(
    url: str, inner: BaseStorage, settings: StorageSettings, on_stale: StaleCallback | None
) -> BaseHeartbeat | None:
    if isinstance(inner, RDBStorage):
        return RDBHeartbeat(inner)
    if isinstance(inner, JournalStorage):
        folder = journal_path(url).with_name(journal_path(url).name + ".heartbeats")
        return FileHeartbeat(inner, folder, settings, on_stale)
    return None


class RDBHeartbeat(BaseHeartbeat):
    """The RDB storage's own heartbeats (a table), plus whether a trial ever had one."""

    def __init__(self, rdb: RDBStorage) -> None:
        self.rdb = rdb

    def record_heartbeat(self, trial_id: int) -> None:
        self.rdb.record_heartbeat(trial_id)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        return self.rdb._get_stale_trial_ids(study_id)

    def get_heartbeat_interval(self) -> int | None:
        return self.rdb.get_heartbeat_interval()

    def get_heartbeat_stale_trial_callback(self) -> StaleCallback | None:
        return self.rdb.get_heartbeat_stale_trial_callback()

    def has_beaten(self, trial_id: int) -> bool:
        from optuna.storages._rdb import models

        session = self.rdb.scoped_session()
        try:
            return models.TrialHeartbeatModel.where_trial_id(trial_id, session) is not None
        finally:
            session.close()


class FileHeartbeat(BaseHeartbeat):
    """Heartbeats as one file per running trial (journal storages), rewritten at every beat.

    A beat is told by the file changing, never by its time against this process's clock: a
    worker whose clock runs an hour ahead, or a host clock stepped forward, would otherwise
    take every live trial for dead. A trial is stale once its file has not changed for
    ``grace_s`` of this process's monotonic clock, so a checker that has just started watches
    a whole grace before it judges.
    """

    def __init__(
        self,
        storage: BaseStorage,
        folder: Path,
        settings: StorageSettings,
        on_stale: StaleCallback | None,
    ) -> None:
        self.storage, self.folder, self.settings = storage, folder, settings
        self.on_stale = on_stale
        self._beats = 0
        self._seen: dict[int, tuple[tuple[int, bytes], float]] = {}  # file state, since when
        folder.mkdir(parents=True, exist_ok=True)

    def record_heartbeat(self, trial_id: int) -> None:
        self._beats += 1  # the content changes at every beat, whatever the clocks say
        beat = f"{os.getpid()} {self._beats} {time.monotonic_ns()}\n"
        (self.folder / str(trial_id)).write_text(beat, encoding="utf-8")

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        now = time.monotonic()
        stale = []
        for t in self.storage.get_all_trials(
            study_id, deepcopy=False, states=(TrialState.RUNNING,)
        ):
            state = self._state(t._trial_id)
            if state is None:
                continue  # never beat: not a worker's trial (same rule as the RDB storage)
            seen = self._seen.get(t._trial_id)
            if seen is None or seen[0] != state:
                self._seen[t._trial_id] = (state, now)
            elif now - seen[1] > self.settings.grace_s:
                stale.append(t._trial_id)
        return stale

    def _state(self, trial_id: int) -> tuple[int, bytes] | None:
        # The modification time as well: a worker of an older tune only touches the file.
        path = self.folder / str(trial_id)
        try:
            return os.stat(path).st_mtime_ns, path.read_bytes()
        except FileNotFoundError:
            return None

    def get_heartbeat_interval(self) -> int:
        return self.settings.heartbeat_s

    def has_beaten(self, trial_id: int) -> bool:
        return (self.folder / str(trial_id)).exists()

    def get_heartbeat_stale_trial_callback(self) -> StaleCallback | None:
        return self.on_stale


def redact(url: str) -> str:
    """``url`` without its password, for messages."""
    return scrub_url(url)
