"""The one exception root of the project.

Every error a user can cause or fix (a bad space file, an unknown objective, a daemon that is not
running) is a ``TunerError``: the CLI prints its message on one line and exits non-zero, with a
traceback only under ``--debug``. Anything else escaping is a bug and keeps its traceback.
"""

from __future__ import annotations

from enum import StrEnum


class TunerError(Exception):
    """Root of every error the CLI reports as one line."""

    exit_code: int = 2


class SpaceError(TunerError):
    """A search-space file is malformed or breaks a rule (names file, YAML path, rule, value)."""


class StudyError(TunerError):
    """A study cannot be created, loaded or resumed as asked."""


class SetupError(TunerError):
    """The set-up, not the sampled config, is wrong (the engine does not serve the model name
    the space asks for, the pinned version is not the installed one): the study stops at once,
    and no trial is counted against its config."""


class FailureKind(StrEnum):
    """Why an engine did not serve a trial.

    Config faults (the sampled config cannot work) make a trial COMPLETE and infeasible, so the
    sampler learns from them. Infrastructure faults make it FAIL and re-queue its config.
    """

    REFUSED = "refused"  # the engine rejected its arguments at start-up
    OOM = "oom"  # out of memory at start-up or under load
    CRASH = "crash"  # the engine died while serving
    READY_TIMEOUT = "ready_timeout"  # never became ready in time
    KNOB_IGNORED = "knob_ignored"  # the engine silently ignored a sampled knob
    INFRA = "infra"  # daemon gone, device busy, client saturated, node lost

    @property
    def is_config_fault(self) -> bool:
        return self is not FailureKind.INFRA


class LaunchError(TunerError):
    """An engine could not be started or made ready.

    ``kind`` tells the study whether the config or the infrastructure is at fault; ``log_tail``
    holds the engine's last log lines so the trial explains itself.
    """

    def __init__(self, message: str, kind: FailureKind, log_tail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.log_tail = log_tail


class InfraError(TunerError):
    """A fault that is not the config's (client saturated, daemon unreachable): trial FAILs."""
