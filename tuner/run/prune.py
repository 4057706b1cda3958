"""The last confirmation launches: every knob a tier's pick keeps measured on its own.

Once the rounds of ``tuner.run.confirm`` have nothing left to launch, each tier's pick
(``tuner.score.recommend``, the one every export shows) may still keep a knob no measurement
credits (``tuner.score.evidence.unproven``). ``prunings`` launches the pick with such knobs at
the engine's defaults (``tuner.score.evidence.tries``), one launch per tier and round; where
the tier's run-to-run noise is still unknown (no config measured twice there), nothing can be
judged, and the pick is confirmed first instead. Each launch can move the pick (to the config
without the knobs, where it holds up), so the rounds go on until no pick keeps an unproven
knob that the space's rules let go back, ``--timeout`` is spent, or a tier has had as many of
these launches as the space has knobs (each pick moves to fewer changes or keeps a knob
measured, so that many settles every knob unless the picks trade places along the way).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from objectives.objective import Objective
from tuner.record.trial import TrialRecord
from tuner.score.apart import without
from tuner.score.eligible import Policy
from tuner.score.evidence import tries, unproven
from tuner.score.pooling import configs
from tuner.score.recommend import recommend
from tuner.space.sample import config_key


def prunings(
    trials: Sequence[FrozenTrial], objective: Objective, tiers: Sequence[int], policy: Policy
) -> tuple[list[TrialRecord], list[tuple[int, int, tuple[str, ...], dict[str, Any]]]]:
    """Picks to confirm (their tier's noise unknown), and per tier the next launch that measures
    kept knobs: (the pick's root trial, the tier, the knobs, the config without them)."""
    groups = configs(trials)
    seen = {config_key(policy.canonical(t.params)) for t in trials}
    queued, spent = queued_confirmations(trials), _spent(trials)
    confirm: dict[int, TrialRecord] = {}
    out = []
    for rec in recommend(trials, objective, tiers, policy):
        if rec.trial is None or not unproven(rec.knobs) or policy.defaults is None:
            continue
        if spent[rec.concurrency] >= len(policy.defaults.values):
            continue  # as many launches as the space has knobs: the tier's pick stays as it is
        pick = groups[rec.trial]
        if rec.noise_cv is None:
            # One launch of the pick at the tier (a pick rests on every launch of its config)
            if len(pick.values(objective, rec.concurrency)) < 2 and rec.trial not in queued:
                confirm[rec.trial] = pick.root
            continue
        for ks in tries(rec.knobs):
            params = without(pick.root.params, ks, policy)
            if (key := config_key(params)) not in seen and policy.allows(params):
                out.append((rec.trial, rec.concurrency, ks, params))
                seen.add(key)
                break
    return sorted(confirm.values(), key=lambda t: t.number), out


def _spent(trials: Sequence[FrozenTrial]) -> Counter[int | None]:
    """Per tier, the launches that measured kept knobs apart there so far."""
    records = map(TrialRecord.of, trials)
    return Counter(r.revert_at for r in records if r.revert_at is not None and r.revert_knob)


def queued_confirmations(trials: Sequence[FrozenTrial]) -> set[int | None]:
    """The configs (by root trial) a confirmation already waits or runs for: the one answer
    every round reads before it queues another."""
    live = (TrialState.WAITING, TrialState.RUNNING)
    return {TrialRecord.of(t).confirm_of for t in trials if t.state in live}
