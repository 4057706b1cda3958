"""When the budget will be met, and how much of it ``--timeout`` leaves room for.

Both come from the study's own launches: the mean time of its finished launches (each from
claim to tell: start-up, benchmark and stop), so a plan made after a few trials already counts
the engine's start-up, the slow part on a GPU node. The time is the run's ``Clock``: the wall
clock's for a real engine; on the simulated engine the hardware's it stands for (each launch's
start-up, warm-up and tiers as the simulator clocks them), so ``--timeout 8h`` on a rehearsal
stops where eight hours on the node would, and the lines say so. Rule breakers and repeats of a
measured launch take no engine time and are left out, as they are out of the budget. Trials
running elsewhere while a trial ends (other slots, other nodes) are taken as the number that
run at once.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.export.hours import span
from tuner.record.trial import TrialRecord


@dataclass
class Clock:
    """What a run's ``--timeout`` and ETA read: the wall clock, or (``hardware``, on the
    simulated engine) the hardware seconds the launches of ``study`` from trial ``since`` on
    would have spent, plus the wall seconds the run waited on other runs' trials."""

    hardware: bool = False
    study: optuna.Study | None = None
    since: int = 0
    waited_s: float = 0.0

    def now(self) -> float:
        if not self.hardware or self.study is None:
            return time.monotonic()
        trials = self.study.get_trials(deepcopy=False)
        spent = sum(launch_seconds([t for t in trials if t.number >= self.since], True))
        return spent + self.waited_s

    def waited(self, seconds: float) -> None:
        """The run waited ``seconds`` on trials running elsewhere. A node waits them out in
        wall time too; counted, a rehearsal's ``--timeout`` passes while it waits on a trial
        whose run is alive but never finishes, as the node's would."""
        if self.hardware:
            self.waited_s += seconds

    @property
    def unit(self) -> str:
        return " of hardware time" if self.hardware else ""


WALL = Clock()


def run_clock(study: optuna.Study, simulated: bool) -> Clock:
    """The clock of a run starting now on ``study``: the hardware's on the simulated engine."""
    if not simulated:
        return WALL
    return Clock(True, study, len(study.get_trials(deepcopy=False)))


def launch_seconds(trials: list[FrozenTrial], hardware: bool = False) -> list[float]:
    """Seconds of each finished launch (confirmations too: they cost the same): wall seconds
    from claim to tell, or the hardware's (start-up, warm-up, tiers) on the simulated engine."""
    out = []
    for t in trials:
        record = TrialRecord.of(t)
        if not record.is_measurement:
            continue
        if hardware and record.times is not None:
            out.append(record.times.total_s)
        elif not hardware and t.datetime_start and t.datetime_complete:
            out.append((t.datetime_complete - t.datetime_start).total_seconds())
    return out


def eta_note(study: optuna.Study, left: int, deadline: float | None, clock: Clock = WALL) -> str:
    """``  | 3 to go: done in ~12 min (about 14:32); 47 min to the timeout fits 11 more (at
    4.1 min a trial)``; empty before any launch finished."""
    trials = study.get_trials(deepcopy=False)
    seconds = launch_seconds(trials, clock.hardware)
    if not seconds or (left <= 0 and deadline is None):
        return ""
    mean = sum(seconds) / len(seconds)
    at_once = 1 + sum(t.state == TrialState.RUNNING for t in trials)
    parts = [_eta(left, mean, at_once, clock)] if left > 0 else []
    if deadline is not None:
        parts.append(_room(deadline - clock.now(), left, mean, at_once))
    pace = f"{span(mean)}{clock.unit} a trial" + (f", {at_once} at once" if at_once > 1 else "")
    return f"  | {'; '.join(parts)} (at {pace})"


def plan_note(study: optuna.Study, left: int, timeout_s: float | None, clock: Clock = WALL) -> str:
    """For the run's first line: what the timeout leaves room for, at the measured pace."""
    seconds = launch_seconds(study.get_trials(deepcopy=False), clock.hardware)
    if timeout_s is None or not seconds or left <= 0:
        return ""
    mean = sum(seconds) / len(seconds)
    return f"; {_room(timeout_s, left, mean, 1)} at the measured {span(mean)}{clock.unit} a trial"


def _eta(left: int, mean: float, at_once: int, clock: Clock = WALL) -> str:
    eta = math.ceil(left / at_once) * mean
    if clock.hardware:  # the hardware's hours, not this machine's: no time of day
        return f"{left} to go: done in ~{span(eta)}{clock.unit}"
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
