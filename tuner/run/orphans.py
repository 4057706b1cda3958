"""Trials whose run is gone, found at once on the host that ran them.

A run killed with SIGKILL (or an OOM kill, or a closed laptop lid) leaves its trial RUNNING.
Its heartbeats stop, and after the grace (3 minutes by default) any worker fails it and queues
its config again. A rerun on the same host need not wait for that: each trial names the
process that claimed it (``WORKER_ATTR``, ``host:pid``), and a pid that is not alive on this
host owns nothing. Trials of other hosts are left to the heartbeat check, since their pids
cannot be seen from here.
"""

from __future__ import annotations

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from tuner.owner import gone
from tuner.record.trial import mark_failed
from tuner.run.objective import Report, requeue

WORKER_ATTR = "tune:worker"  # a system attr: who ran a trial (host:pid and slot)


def owner_of(trial: FrozenTrial) -> str:
    """``host:pid`` of the process that claimed ``trial`` ('' when it names none)."""
    return str(trial.system_attrs.get(WORKER_ATTR, "")).split(" ", 1)[0]


def fail_orphans(study: optuna.Study, report: Report) -> list[int]:
    """FAIL each RUNNING trial whose run is gone and queue its config again; call it under
    the study lock, as the heartbeat check is, so that no other worker queues it too."""
    lost = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = owner_of(t)
        if owner and gone(owner) and _fail(study, t, f"its run {owner} is gone (killed)"):
            report(f"trial {t.number}: its run {owner} is gone; its config is queued again")
            lost.append(t.number)
    return lost


def _fail(study: optuna.Study, trial: FrozenTrial, why: str) -> bool:
    try:
        mark_failed(optuna.Trial(study, trial._trial_id), why)
        frozen = study.tell(trial.number, state=TrialState.FAIL)
    except (UpdateFinishedTrialError, ValueError):  # ValueError: tell of a finished trial
        return False  # finished meanwhile: its late result or another check stands
    requeue(study, frozen, reason=why)
    return True
