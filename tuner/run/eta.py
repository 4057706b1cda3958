"""When the budget will be met, and how much of it ``--timeout`` leaves room for.

Both come from the study's own launches: the mean wall time of its finished launches (each
from claim to tell: start-up, benchmark and stop), so a plan made after a few trials already
counts the engine's start-up, the slow part on a GPU node. Rule breakers and repeats of a
measured launch take no engine time and are left out, as they are out of the budget. Trials
running elsewhere while a trial ends (other slots, other nodes) are taken as the number that
run at once.
"""

from __future__ import annotations

import math
import time

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.export.hours import span
from tuner.record.trial import TrialRecord


def launch_seconds(trials: list[FrozenTrial]) -> list[float]:
    """Wall seconds of each finished launch (confirmations too: they cost the same)."""
    out = []
    for t in trials:
        if t.datetime_start and t.datetime_complete and TrialRecord.of(t).is_measurement:
            out.append((t.datetime_complete - t.datetime_start).total_seconds())
    return out


def eta_note(study: optuna.Study, left: int, deadline: float | None) -> str:
    """``  | 3 to go: done in ~12 min (about 14:32); 47 min to the timeout fits 11 more (at
    4.1 min a trial)``; empty before any launch finished."""
    trials = study.get_trials(deepcopy=False)
    seconds = launch_seconds(trials)
    if not seconds or (left <= 0 and deadline is None):
        return ""
    mean = sum(seconds) / len(seconds)
    at_once = 1 + sum(t.state == TrialState.RUNNING for t in trials)
    parts = [_eta(left, mean, at_once)] if left > 0 else []
    if deadline is not None:
        parts.append(_room(deadline - time.monotonic(), left, mean, at_once))
    pace = f"{span(mean)} a trial" + (f", {at_once} at once" if at_once > 1 else "")
    return f"  | {'; '.join(parts)} (at {pace})"


def plan_note(study: optuna.Study, left: int, timeout_s: float | None) -> str:
    """For the run's first line: what the timeout leaves room for, at the measured pace."""
    seconds = launch_seconds(study.get_trials(deepcopy=False))
    if timeout_s is None or not seconds or left <= 0:
        return ""
    mean = sum(seconds) / len(seconds)
    return f"; {_room(timeout_s, left, mean, 1)} at the measured {span(mean)} a trial"


def _eta(left: int, mean: float, at_once: int) -> str:
    eta = math.ceil(left / at_once) * mean
    return f"{left} to go: done in ~{span(eta)} (about {_clock(eta)})"


def _room(remaining: float, left: int, mean: float, at_once: int) -> str:
    if remaining <= 0:
        return "timeout reached: no new trials start"
    fits = int(remaining // mean) * at_once
    more = f"{fits} of the {left} to go" if left > 0 and fits < left else f"{fits} more"
    return f"{span(remaining)} to the timeout fits {more}"


def _clock(seconds: float) -> str:
    """The local time ``seconds`` from now (with the weekday when it is not today)."""
    at = time.localtime(time.time() + seconds)
    today = time.localtime().tm_yday == at.tm_yday
    return time.strftime("%H:%M" if today else "%a %H:%M", at)
