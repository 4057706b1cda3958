"""Opening a study that exists, from any storage tune writes, for reading it back.

A missing study is a one-line error, never a new empty study; the results folder's
``study.db`` is the default storage.
"""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.storages import BaseStorage

from tuner.errors import DiskError, StudyError
from tuner.storage.resilient import disk_refusal
from tuner.storage.results import StudyPaths, check_study_name
from tuner.storage.urls import (
    StorageSettings,
    backend_of,
    driver_url,
    open_storage,
    redact,
    sqlite_path,
)

READ_OUTAGE_S = 60.0  # a read is better failed than stuck for half an hour of outage


def load_study(name: str, storage: str | None, results_dir: Path) -> optuna.Study:
    """Open an existing study; a missing one is a one-line error, never a new empty study."""
    paths = StudyPaths.for_study(results_dir, name)
    if storage is None:
        if not paths.storage_file.exists():
            raise StudyError(
                f"no study {name!r} under {results_dir}/ (looked for {paths.storage_file}); "
                "pass --storage URL for a study stored elsewhere"
            )
        storage = paths.default_storage_url
    storage = driver_url(storage)
    return _load(name, storage, storage)


def open_study(name: str, storage: str | None, results_dir: Path) -> optuna.Study:
    """The study in ``storage`` (any backend tune runs on, journal files included), else in
    ``results_dir/<name>/study.db``; a missing study is a one-line error."""
    check_study_name(name)
    if storage is None:
        return load_study(name, None, results_dir)
    backend = open_storage(storage, StorageSettings(outage_s=READ_OUTAGE_S))
    return _load(name, backend, storage)


def _load(name: str, backend: str | BaseStorage, url: str) -> optuna.Study:
    """The study ``name`` in ``backend``; a missing one is a one-line error listing those there."""
    try:
        return optuna.load_study(study_name=name, storage=backend)
    except KeyError:
        known = [s.study_name for s in optuna.get_all_study_summaries(backend)]
        raise StudyError(f"no study {name!r} in {redact(url)}; studies there: {known}") from None
    except Exception as err:  # a URL opened here has no Retrier to name the file's refusal
        if (why := disk_refusal(err)) is None:
            raise
        where = sqlite_path(url) if backend_of(url) == "sqlite" else redact(url)
        raise DiskError(f"{where}: {why}") from None
