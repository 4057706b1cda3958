"""Where a study's hours went: each launch's seconds in one part, and the cache's effect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from optuna.trial import FrozenTrial, TrialState, create_trial

from tests.tuner.export.conftest import build_study
from tuner.export import export_study
from tuner.export.hours import span, study_hours
from tuner.export.show import hours_text, show_study
from tuner.record.times import TrialTimes
from tuner.run.study import RunOptions, run_study


def launch(
    startup: float,
    key: str | None = "k1",
    tiers: dict[str, float] | None = None,
    state: TrialState = TrialState.COMPLETE,
    ready: bool = True,
    **attrs: Any,
) -> FrozenTrial:
    times = TrialTimes(startup, ready, 10.0 if ready else None, tiers or {}, key, None)
    times.quality_s = attrs.pop("quality_s", None)
    times.compile_cached = None if key is None else attrs.pop("cached", False)
    values = [1.0, 1.0] if state == TrialState.COMPLETE else None
    return create_trial(state=state, values=values, user_attrs={"times": times.to_json(), **attrs})


def numbered(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    for i, t in enumerate(trials):
        t.number = i
    return trials


STUDY = numbered(
    [
        launch(100.0, tiers={"1": 300.0, "4": 100.0}),
        launch(40.0, tiers={"1": 200.0, "4": 50.0}, cached=True, failure_kind="slo"),
        launch(100.0, key="k2", tiers={"1": 250.0, "4": 60.0}, quality_s=12.0),
        launch(40.0, key="k2", tiers={"1": 100.0, "4": 50.0}, cached=True, confirm_of=2),
        launch(30.0, key=None, ready=False, failure_kind="oom"),
        launch(45.0, tiers={"1": 20.0}, state=TrialState.FAIL, interrupted=True, cached=True),
        create_trial(state=TrialState.COMPLETE, values=[1.0, 1.0], user_attrs={"duplicate_of": 0}),
        create_trial(state=TrialState.COMPLETE, values=[1.0, 1.0]),  # from before times
    ]
)


def test_each_second_lands_in_one_part() -> None:
    h = study_hours(STUDY, [1, 4], simulated=True)
    assert dict(h.parts()) == {
        "start-up": 240.0,
        "warm-up": 30.0,
        "tiers": 960.0,
        "quality checks": 12.0,
        "confirmations": 40.0 + 10.0 + 150.0,
        "failures": 30.0 + (45.0 + 10.0 + 20.0),
    }
    assert h.tiers_s == {1: 750.0, 4: 210.0}
    assert h.total_s == 240 + 30 + 960 + 12 + 200 + 105
    assert (h.launches, h.untimed) == (6, 1)  # the copy of trial 0 launched nothing
    assert h.share(h.total_s) == 1.0


def test_a_launch_below_the_quality_floor_spent_the_studys_hours_not_failures() -> None:
    lower = numbered([launch(50.0, tiers={"1": 5.0}, failure_kind="quality", quality_s=3.0)])
    h = study_hours(lower, [1], simulated=False)
    assert dict(h.parts())["quality checks"] == 3.0
    assert dict(h.parts())["failures"] == 0.0
    assert h.total_s == 50 + 10 + 5 + 3


def test_first_launches_against_later_ones_overall_and_per_compile_key() -> None:
    cache = study_hours(STUDY, [1, 4], simulated=True).cache
    assert cache is not None
    assert cache.first_s == 100.0
    assert cache.later_n == 4 and cache.later_s == pytest.approx((40 + 100 + 40 + 45) / 4)
    by_key = {k.key: k for k in cache.keys}
    assert (by_key["k1"].launches, by_key["k1"].first_s) == (3, 100.0)
    assert by_key["k1"].later_s == pytest.approx(42.5)
    assert (by_key["k2"].first_s, by_key["k2"].later_s) == (100.0, 40.0)
    assert cache.key_first_s == 100.0 and cache.key_later_s == pytest.approx(125 / 3)
    assert (cache.compiled, cache.loaded) == (2, 3)


def test_tune_show_says_it_in_a_few_lines() -> None:
    text = hours_text(study_hours(STUDY, [1, 4], simulated=True))
    lines = text.splitlines()
    assert lines[0].startswith("where the hours went (on the simulated engine's clock")
    assert lines[1].split()[:3] == ["start-up", "4.0", "min"]
    assert "(c1 12.5 min, c4 3.5 min)" in lines[3]
    assert lines[4].split()[:4] == ["quality", "checks", "12", "s"]
    assert lines[5].split()[0] == "confirmations" and lines[6].split()[0] == "failures"
    assert "1 earlier launches recorded no times" in text
    assert "first launch 1.7 min to ready, later launches 56 s (mean of 4)" in lines[-1]
    assert "per compile key (2): first launch 1.7 min, repeats 42 s (3)" in lines[-1]


def test_durations_read_as_people_read_them() -> None:
    assert [span(s) for s in (0.25, 4.21, 42.0, 750.0, 4 * 3600 + 900)] == [
        "0.25 s",
        "4.2 s",
        "42 s",
        "12.5 min",
        "4.25 h",
    ]


def test_an_older_study_without_times_says_so(tmp_path: Path) -> None:
    build_study(tmp_path)
    assert "no launch recorded its times" in show_study("hand", None, tmp_path)
    html = (export_study("hand", None, None, tmp_path).out_dir / "report.html").read_text()
    assert '<h2 id="hours">Where the hours went</h2>' in html
    assert "No launch recorded its times" in html


def test_the_report_and_tune_show_of_a_run_study(space_file: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    opts = RunOptions(space_file, trials=5, confirm=0, results_dir=results)
    run_study(opts, report=lambda _: None)
    html = (results / "small" / "report.html").read_text()
    section = html[html.index('<h2 id="hours">') :]
    assert "engine time over 5 launches, on the simulated engine&#x27;s clock" in section
    assert "<td>start-up</td>" in section and "<td>c1 " in section
    # Five configs, one pair apart only by the prefill cap: four keys, one repeat.
    assert "per compile key (4): first launch 2.5 min, repeats 1.5 min (1)" in section
    assert section.count("<code>") == 1  # the repeated key; the other three were launched once
    assert "3 compile keys were launched once" in section
    shown = show_study("small", None, results)
    assert "where the hours went (on the simulated engine's clock" in shown
