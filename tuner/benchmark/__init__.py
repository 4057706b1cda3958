"""A study's workload replayed against any server (``tune bench --space`` / ``--study``).

``replay_of_space`` and ``replay_of_study`` read the workload (dataset, tiers, request counts,
seed) and the SLOs from a space file or from the space a study recorded, so ``tune bench``
measures a hand-started server exactly as a trial measures its engine; ``slo_verdicts`` says,
tier by tier, whether the server met them. Plain data: the CLI renders it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from objectives.metrics import SLO
from objectives.result import TierResult
from objectives.workload import WorkloadSpec
from tuner.space.load import load_space
from tuner.space.schema import Space
from tuner.storage.study_data import load_study_data


@dataclass(frozen=True)
class Replay:
    """What a study sends and asks of each tier, and the model name its engine serves."""

    source: str  # the space file or study it came from, for the report
    workload: WorkloadSpec
    slos: tuple[SLO, ...]
    model: str
    base_dir: Path  # where the workload's relative file paths start


def replay_of_space(path: Path) -> Replay:
    """The workload and SLOs of the space file at ``path``."""
    return _replay(f"space {path}", load_space(path), path.parent)


def replay_of_study(name: str, storage: str | None, results_dir: Path) -> Replay:
    """The workload and SLOs of the space study ``name`` recorded when it was created."""
    data = load_study_data(name, storage, results_dir)
    where = data.record.space_path
    base = Path(where).parent if where else Path.cwd()
    return _replay(f"study {name}", data.space, base)


def _replay(source: str, space: Space, base_dir: Path) -> Replay:
    model = space.engine.served_model_name or space.engine.model
    return Replay(source, space.workload, tuple(space.slos), model, base_dir)


@dataclass(frozen=True)
class Verdict:
    """One tier against the SLOs that apply to it."""

    concurrency: int
    slos: tuple[str, ...]  # each SLO as written (``p99_ttft_ms <= 400``)
    missed: tuple[str, ...]  # what broke, with the measured figure (empty: all held)

    @property
    def held(self) -> bool:
        return not self.missed


def slo_verdicts(results: Sequence[TierResult], slos: Sequence[SLO]) -> list[Verdict]:
    """Per measured tier: the per-tier SLOs that apply and those it missed (a per-request SLO
    counts through ``request_goodput`` only, as in a trial)."""
    out = []
    for result in results:
        mine = [s for s in slos if s.applies_to(result.concurrency) and not s.per_request]
        words = tuple(_words(s) for s in mine)
        out.append(Verdict(result.concurrency, words, tuple(result.slo_violations)))
    return out


def _words(slo: SLO) -> str:
    bounds = [f"<= {slo.max:g}"] if slo.max is not None else []
    bounds += [f">= {slo.min:g}"] if slo.min is not None else []
    return f"{slo.metric} {' and '.join(bounds)}"
