"""Every error class of the project, under one root.

Every error a user can cause or fix (a bad space file, an unknown objective, a daemon that is not
running) is a ``TunerError``: the CLI prints its message on one line and exits non-zero, with a
traceback only under ``--debug``. Anything else escaping is a bug and keeps its traceback.

    TunerError                  one line, exit code 2 unless the class says otherwise
    ├── SpaceError              a space file is malformed (file, YAML path, rule, value)
    │   └── DatasetError        a dataset file is missing, malformed or too small
    ├── StudyError              a study cannot be created, loaded or resumed as asked
    ├── SetupError              the set-up, not the config, is wrong: the study stops at once
    ├── SlotError               accelerator or slot flags that cannot be laid out
    ├── LaunchError             the engine, as the config made it, did not start, get ready
    │   │                       or keep serving: the trial is infeasible; ``kind`` says how
    │   └── EngineHung          it served no token for a whole window, its health still 200
    ├── InfraError              not the config's fault (daemon gone, device busy, client
    │                           saturated, engine unreachable): the trial FAILs and is queued
    │                           again
    ├── StorageUnavailable      the database stayed unreachable past the outage allowance
    ├── DiskError               a disk full, a folder read-only, a database file that is not
    │                           one: the machine's to fix, named by its path, at once
    ├── SecretLeakError         an export file would hold a secret's value
    ├── BenchIncomplete         ``tune bench`` ran, but a tier is not the server's alone (exit 1)
    └── EngineExited            ``tune sim-serve``'s engine refused to start (its exit code)

Whose fault a failure is, is said by its class and only by it: ``LaunchError`` (and
``EngineHung``) the config's, ``InfraError`` the infrastructure's. ``FailureKind`` says how a
config failed, the word its trial records.

The simulated engine's own ``EngineRefused`` and ``EngineDead`` are not here on purpose: they
are what a real engine's process exit and log are to the launchers, which turn them into a
``LaunchError``; no user ever sees them.
"""

from __future__ import annotations

import errno
from enum import StrEnum


class TunerError(Exception):
    """Root of every error the CLI reports as one line."""

    exit_code: int = 2


class SpaceError(TunerError):
    """A search-space file is malformed or breaks a rule (names file, YAML path, rule, value)."""


class DatasetError(SpaceError):
    """A dataset file is missing, malformed, or holds too few usable entries."""


class StudyError(TunerError):
    """A study cannot be created, loaded or resumed as asked."""


class SetupError(TunerError):
    """The set-up, not the sampled config, is wrong (the engine does not serve the model name
    the space asks for, the pinned version is not the installed one): the study stops at once,
    and no trial is counted against its config."""


class SlotError(TunerError):
    """Accelerator or slot flags that cannot be laid out (names the flag and the value)."""


class FailureKind(StrEnum):
    """How the engine a config made did not serve a trial (``LaunchError.kind``): the trial is
    COMPLETE and infeasible, so the sampler learns from it. Faults that are not the config's
    are ``InfraError``s, and have no kind."""

    REFUSED = "refused"  # the engine rejected its arguments at start-up
    OOM = "oom"  # out of memory at start-up or under load
    CRASH = "crash"  # the engine died while serving
    HUNG = "hung"  # served no token for a whole window while its health still answered
    READY_TIMEOUT = "ready_timeout"  # never became ready in time
    KNOB_IGNORED = "knob_ignored"  # the engine silently ignored a sampled knob


class LaunchError(TunerError):
    """The engine a config made could not be started or made ready, or stopped serving.

    ``kind`` says how (refused, out of memory, crashed...); ``log_tail`` holds the engine's
    last log lines so the trial explains itself.
    """

    def __init__(self, message: str, kind: FailureKind, log_tail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.log_tail = log_tail


class EngineHung(LaunchError):
    """The engine served no token for a whole window while its ``/health`` still answered."""

    def __init__(self, message: str) -> None:
        super().__init__(message, FailureKind.HUNG)


class InfraError(TunerError):
    """A fault that is not the config's (daemon unreachable, device busy, client saturated, an
    engine that is not ours gone): the trial FAILs and its config is queued again."""


class StorageUnavailable(TunerError):
    """The database stayed unreachable for longer than the outage allowance."""


class DiskError(TunerError):
    """Where tune writes refused it: a disk full, a folder read-only or not ours, a database
    file that is not one. No wait mends these; the message names the path."""


# What an OSError's errno says of the disk, in the words a user acts on.
_DISK_ERRNOS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


def disk_error(err: OSError) -> DiskError | None:
    """``err`` as one line naming its path, when it is the disk's refusal (None: not one)."""
    why = _DISK_ERRNOS.get(err.errno or 0)
    if why is None:
        return None
    where = err.filename if err.filename is not None else "a file tune writes"
    return DiskError(f"cannot write {where}: {why}")


class SecretLeakError(TunerError):
    """An export file holds the value of a secret; the export is refused."""


class BenchIncomplete(TunerError):
    """The benchmark ran, but some tier's numbers are not the server's alone (exit code 1)."""

    exit_code = 1


class EngineExited(TunerError):
    """The simulated engine refused to start; its own log line was printed already."""

    def __init__(self, code: int) -> None:
        super().__init__(f"the simulated engine exited with status {code}")
        self.exit_code = code
