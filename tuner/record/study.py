"""The study record: what a study stores about itself, written and read back here only.

``tune run`` records the space it was created from (its text, path and digest), the objective,
the tiers, the target and the earlier study it was warm-started from, if any, so that
``tune show``, ``tune export`` and a joining ``tune worker`` need nothing but the storage. The
trial budget shared by every worker is stored here too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import optuna

_BUDGET = "budget"
REQUIRED = ("objective", "tiers", "space_yaml")  # what an export cannot do without


@dataclass(frozen=True)
class StudyRecord:
    """A study's own attrs, read back (fields are None for a study tune did not create)."""

    objective: str | None
    tiers: list[int]
    space_digest: str | None
    space_path: str
    space_yaml: str | None
    target_kind: str | None
    hardware: str | None
    engine: dict[str, Any] | None
    created: float | None
    trade_off: list[str] | None = None  # objectives each tier's front trades the objective against
    # the earlier study whose picks were queued first and whose measurements are the sampler's
    # prior: {"study": name, "storage": its URL without password, None for the results folder}
    warm_start: dict[str, Any] | None = None
    # a digest of every file the workload reads, by the name the space gives it: what they
    # hold is part of what was measured (None: a study from before it was recorded)
    workload_files: dict[str, str] | None = None

    @classmethod
    def of(cls, attrs: Mapping[str, Any]) -> StudyRecord:
        return cls(
            objective=attrs.get("objective"),
            tiers=[int(t) for t in attrs.get("tiers") or []],
            space_digest=attrs.get("space_digest"),
            space_path=str(attrs.get("space_path", "")),
            space_yaml=attrs.get("space_yaml"),
            target_kind=attrs.get("target_kind"),
            hardware=attrs.get("hardware"),
            engine=attrs.get("engine"),
            created=attrs.get("created"),
            trade_off=attrs.get("trade_off"),
            warm_start=attrs.get("warm_start"),
            workload_files=attrs.get("workload_files"),
        )

    @classmethod
    def read(cls, study: optuna.Study) -> StudyRecord | None:
        """The study's record, or None for a study that holds none yet."""
        attrs = study.user_attrs
        return cls.of(attrs) if attrs else None

    @classmethod
    def new(cls, **fields: Any) -> StudyRecord:
        return cls(created=time.time(), **fields)

    def write(self, study: optuna.Study) -> None:
        for key, value in asdict(self).items():
            study.set_user_attr(key, value)


def write_trade_off(study: optuna.Study, names: list[str]) -> None:
    """What the fronts trade against is how results are read, not what was measured: a rerun
    may change it."""
    study.set_user_attr("trade_off", names)


def write_workload_files(study: optuna.Study, digests: dict[str, str]) -> None:
    """Recorded on the first run that knows them, for a study created before they were."""
    study.set_user_attr("workload_files", digests)


def missing_keys(attrs: Mapping[str, Any]) -> list[str]:
    """What a study lacks to be exported or joined (it was not created by ``tune run``)."""
    return [k for k in REQUIRED if k not in attrs]


def read_budget(attrs: Mapping[str, Any]) -> int | None:
    """The trial budget every worker of the study shares (None: not set yet)."""
    stored = attrs.get(_BUDGET)
    return int(stored) if stored is not None else None


def write_budget(study: optuna.Study, budget: int) -> None:
    study.set_user_attr(_BUDGET, budget)
