"""Each launch records where its time went: start-up apart from warm-up and tiers, however the
trial ends, and a study's later launches of a compile key start from its kept cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import optuna
import pytest
from optuna.trial import TrialState

import launchers
from launchers.sim import SimLauncher
from objectives.endpoint import Endpoint
from tests.tuner.conftest import write_yaml
from tuner.errors import InfraError
from tuner.record.trial import TrialRecord
from tuner.run.study import RunOptions, run_study

COLD = 53.0 + 95.0  # the H200 profile: weights, then a cold compile
WARM = 53.0 + 37.0  # the graphs read back from the study's compile cache


def run(space: Path, tmp_path: Path, trials: int, confirm: int = 0) -> list[TrialRecord]:
    opts = RunOptions(space, trials=trials, confirm=confirm, results_dir=tmp_path / "results")
    run_study(opts, report=lambda _: None)
    url = f"sqlite:///{tmp_path / 'results' / 'small' / 'study.db'}"
    return [TrialRecord.of(t) for t in optuna.load_study(study_name="small", storage=url).trials]


def test_every_launch_records_start_up_warm_up_and_tiers(space_file: Path, tmp_path: Path) -> None:
    records = run(space_file, tmp_path, trials=5)
    launched = [r for r in records if r.is_measurement]
    assert len(launched) == 5
    keys: set[str | None] = set()
    for r in launched:
        assert r.times is not None and r.times.ready
        assert r.times.warmup_s is not None and r.times.warmup_s > 0
        assert r.times.tiers_s == {c: r.tiers[c]["duration"] for c in ("1", "4")}
        # The prefill cap is no part of the compiled graphs: configs apart by it share a key.
        expected = (WARM, True) if r.times.compile_key in keys else (COLD, False)
        assert (r.times.startup_s, r.times.compile_cached) == expected
        keys.add(r.times.compile_key)
    assert len(keys) < len(launched)  # a key launched twice, so both cases were seen
    assert all(r.times is None for r in records if not r.is_measurement)


def test_a_confirmation_starts_from_the_studys_compile_cache(
    space_file: Path, tmp_path: Path
) -> None:
    records = run(space_file, tmp_path, trials=2, confirm=1)
    by_number = {r.number: r for r in records}
    confirms = [r for r in records if r.confirm_of is not None and r.times is not None]
    assert confirms
    for r in confirms:
        assert r.times is not None and r.times.compile_cached is True
        assert r.times.startup_s == WARM
        root = by_number[r.confirm_of or 0].times
        assert root is not None and root.compile_key == r.times.compile_key


class _CutEngine:
    """A virtual engine that is Ctrl-C'd at its third run: warm-up and c1 done, c4 not."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.runs = inner, 0

    def run(self, *args: Any, **kw: Any) -> Any:
        self.runs += 1
        if self.runs == 3:
            raise KeyboardInterrupt
        return self.inner.run(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FaultySim(SimLauncher):
    """The simulated engine; trial 1 loses its daemon once ready, trial 2 is cut mid-tiers."""

    kind: ClassVar[str] = "faulty"
    seen: ClassVar[set[int]] = set()

    def wait_ready(self, timeout_s: float) -> Endpoint:
        endpoint = super().wait_ready(timeout_s)
        number = int(self._number)
        if number in FaultySim.seen:
            return endpoint
        FaultySim.seen.add(number)
        if number == 1:
            raise InfraError("docker daemon unreachable")
        if number == 2:
            return Endpoint(endpoint.model, virtual=_CutEngine(endpoint.virtual))
        return endpoint

    def start(self, config: Any, trial_dir: Path) -> None:
        self._number = config.labels["trial"]
        super().start(config, trial_dir)


@pytest.fixture
def faulty(monkeypatch: pytest.MonkeyPatch) -> None:
    launchers.launcher_class("sim")  # the built-in kinds first
    monkeypatch.setitem(launchers.LAUNCHERS, "faulty", FaultySim)
    FaultySim.seen = set()


def test_failed_and_interrupted_launches_keep_what_they_spent(
    space_file: Path, tmp_path: Path, small_space: dict[str, Any], faulty: None
) -> None:
    small_space["target"] = {"kind": "faulty"}
    write_yaml(space_file, small_space)
    records = run(space_file, tmp_path, trials=4)
    lost, cut = records[1], records[2]
    assert lost.state == TrialState.FAIL and lost.times is not None
    assert lost.times.startup_s in (COLD, WARM) and not lost.times.ready and not lost.times.tiers_s
    assert cut.state == TrialState.FAIL and cut.interrupted and cut.times is not None
    assert cut.times.ready and cut.times.warmup_s and list(cut.times.tiers_s) == ["1"]
