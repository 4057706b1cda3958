"""The results folder of a study, and crash-safe writes into it.

Layout: ``results/<study>/`` holds ``study.db`` (the default Optuna storage), ``trials/NNNN/``
(one folder per trial: resolved command and env, engine log, per-tier benchmark JSON),
``trials.csv`` and the recommendation files. Every file is written to a temporary name and
renamed, so a crash mid-write never leaves a truncated result behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.engine import EngineConfig
from tuner.errors import StudyError

STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_study_name(name: str) -> str:
    """``name`` if it is a plain folder name under results/ (no path, no ``..``).

    Raises:
        StudyError: naming the rule and the bad name.
    """
    if not STUDY_NAME.match(name) or ".." in name:
        raise StudyError(
            f"study name {name!r}: letters, digits, '.', '_' and '-', starting with a letter "
            "or digit, without '..' (it names a folder under the results folder)"
        )
    return name


def _file_mode() -> int:
    # mkstemp creates 0600 files; results are meant to be read like any file the user writes.
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _file_mode()


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder and an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:  # named for the file meant, not the temporary name tried
        raise OSError(err.errno, err.strerror, str(path)) from None
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(err.errno, err.strerror, str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def staged_dir(final: Path) -> Iterator[Path]:
    """A trial folder filled under a hidden ``.NAME.partial`` name, renamed to ``final`` when
    the trial ends (any way but a hard kill): a ``trials/NNNN`` folder is always whole, and a
    crash leaves only a ``.partial`` one."""
    staging = final.with_name(f".{final.name}.partial")
    if staging.exists():
        shutil.rmtree(staging)
    try:
        yield staging
    finally:
        if staging.exists() and not final.exists():
            os.replace(staging, final)


def json_text(data: Any) -> str:
    """How every JSON file of a study is written: sorted keys, two-space indent, a last newline."""
    return json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"


def set_aside_trials(root: Path) -> Path | None:
    """A new study's ``trials/NNNN`` numbers start at 0 again: folders an earlier study of the
    same name left (its storage deleted, or another storage) move to ``trials.before-TIME/``,
    so that no trial of the new study meets one; returns where they went (None: none there)."""
    trials = root / "trials"
    old = (
        sorted(p for p in trials.iterdir() if not p.name.startswith(".")) if trials.is_dir() else []
    )
    if not old:
        return None
    aside = root / f"trials.before-{time.strftime('%Y%m%d-%H%M%S')}"
    aside.mkdir()
    for path in old:
        os.replace(path, aside / path.name)
    return aside


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json_text(data))


@dataclass(frozen=True)
class StudyPaths:
    """Where one study's files live."""

    root: Path

    @classmethod
    def for_study(cls, results_dir: Path, study: str) -> StudyPaths:
        return cls(results_dir / check_study_name(study))

    @property
    def storage_file(self) -> Path:
        return self.root / "study.db"

    @property
    def default_storage_url(self) -> str:
        return f"sqlite:///{self.storage_file}"

    @property
    def trials_csv(self) -> Path:
        return self.root / "trials.csv"

    @property
    def recommendations_json(self) -> Path:
        return self.root / "recommendations.json"

    @property
    def recommendations_txt(self) -> Path:
        return self.root / "recommendations.txt"

    def trial_dir(self, number: int) -> Path:
        return self.root / "trials" / f"{number:04d}"


def write_trial_config(trial_dir: Path, config: EngineConfig) -> None:
    """The resolved launch of a trial, secrets redacted: what to paste to reproduce it."""
    write_json(
        trial_dir / "engine.json",
        {
            "argv": config.public_argv(),
            "env": config.public_env(),
            "params": dict(config.params),
            "devices": list(config.devices),
            "engine": config.engine,
            "engine_version": config.engine_version,
        },
    )
    write_atomic(trial_dir / "command.sh", "#!/bin/sh\n" + config.shell_command() + "\n")
