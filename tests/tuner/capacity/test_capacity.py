"""`tune capacity` on the simulated engine: a short study, then each pick and the defaults
launched once and searched, the answer bracketing the SLO, and every export showing it."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from launchers.sim import SimLauncher
from tests.tuner.conftest import SMALL_SPACE
from tuner.capacity import CapacityOptions, run_capacity
from tuner.cli import main
from tuner.engine import EngineConfig
from tuner.export.show import show_study
from tuner.run.study import RunOptions, run_study
from tuner.storage.capacity import CapacityReport, read_capacity, replicas

SLO_MS = 500.0  # 2K-token prompts on the simulated H200: capacity well under --max-users 32


@dataclass
class Measured:
    results: Path
    storage: str
    report: CapacityReport
    starts: list[dict[str, Any]]


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Measured]:
    tmp = tmp_path_factory.mktemp("capacity")
    space: dict[str, Any] = copy.deepcopy(SMALL_SPACE)
    space["slos"] = [{"metric": "p99_ttft_ms", "max": SLO_MS}]
    # Defaults a tuned config beats: 4 seats hold users back at the c8 tier, where a tuned
    # seat cap acts (at c1 and c4 it could not, and a pick leaves it at the default there).
    space["parameters"]["max_num_seqs"]["default"] = 4
    space["workload"]["tiers"] = [1, 8]
    path = tmp / "small.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    storage = f"journal:{tmp / 'journal.log'}"  # a study in well under a second
    opts = RunOptions(path, "p99_ttft", trials=3, results_dir=tmp / "r", storage=storage, confirm=0)
    run_study(opts, report=lambda _: None)
    starts: list[dict[str, Any]] = []
    start = SimLauncher.start

    def counted(self: SimLauncher, config: EngineConfig, trial_dir: Path) -> None:
        starts.append(dict(config.params))
        start(self, config, trial_dir)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SimLauncher, "start", counted)
        report = run_capacity(
            CapacityOptions("small", storage, tmp / "r", max_users=32), report=lambda _: None
        )
    yield Measured(tmp / "r", storage, report, starts)


def test_each_config_is_launched_once_for_its_whole_search(measured: Measured) -> None:
    configs = measured.report.configs
    # A pick that beats the defaults, then the defaults (named with the tiers they win, if any).
    assert len(configs) >= 2 and "defaults" not in configs[0].label
    assert configs[-1].label.endswith("defaults") or configs[-1].label.endswith("(defaults)")
    assert measured.starts == [c.params for c in configs]
    assert all(c.launches == 1 and len(c.probes) > 5 for c in configs)


def test_the_answer_holds_the_slo_and_one_more_user_breaks_it(measured: Measured) -> None:
    for c in measured.report.configs:
        assert c.capacity and c.above == c.capacity + 1 and c.exact, c.label
        assert c.bound_by == "p99_ttft_ms" and c.failure is None
        at, above = c.runs_at(c.capacity), c.runs_at(c.above)
        assert len(at) == len(above) == 3  # the boundary rests on three runs each side
        assert sum(p.ok for p in at) >= 2 and sum(p.ok for p in above) <= 1
        for p in at + above:  # what each run measured says what it was judged
            assert p.ok == (p.values["p99_ttft_ms"] <= SLO_MS) and p.requests >= 2 * p.load
    *picks, base = measured.report.configs
    assert max(p.capacity or 0 for p in picks) > (base.capacity or 0)


def test_every_run_is_on_disk_beside_the_engine_log(measured: Measured) -> None:
    pick = measured.report.configs[0]
    runs = measured.results / "small" / "capacity" / pick.label.replace(",", "-")  # c1-c4
    assert (runs / "engine.log").is_file() and (runs / "engine.json").is_file()
    files = sorted(runs.glob("probe*.json"))
    assert len(files) == len(pick.probes)
    last = json.loads(files[-1].read_text())
    assert last["max_concurrency"] == pick.probes[-1].load


def test_replicas_round_up_and_a_config_that_serves_none_needs_no_count() -> None:
    assert replicas(500, 37) == 14 and replicas(74, 37) == 2 and replicas(1, 37) == 1
    assert replicas(10, 0) is None and replicas(10, None) is None


def test_the_recipe_the_report_and_show_read_it_back(measured: Measured) -> None:
    study = measured.results / "small"
    assert read_capacity(study) == measured.report
    pick, base = measured.report.configs[0], measured.report.configs[-1]
    recipe = yaml.safe_load((study / "recipe.yaml").read_text())
    point = recipe["presets"]["small"]["points"][f"c{pick.tiers[-1]}"]["capacity"]
    assert point["users_per_replica"] == pick.capacity and point["baseline"] == base.capacity
    assert point["breaks_at"] == pick.capacity + 1  # type: ignore[operator]
    html = (study / "report.html").read_text()
    assert 'id="capacity"' in html and f"c={pick.capacity} users per replica" in html
    shown = show_study("small", measured.storage, measured.results)
    line = f"c={pick.capacity} users per replica at P99 TTFT <= 500 ms"
    assert line in shown and f"; {base.capacity} for the defaults: " in shown


def copy_of(measured: Measured, tmp: Path) -> tuple[Path, str]:
    """The measured study's results and storage, copied: a test that measures again leaves
    the shared ones as the fixture made them."""
    shutil.copytree(measured.results, tmp / "r")
    journal = tmp / "journal.log"
    shutil.copy(measured.storage.removeprefix("journal:"), journal)
    return tmp / "r", f"journal:{journal}"


def test_the_cli_prints_the_answer_and_replicas(
    measured: Measured, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results, storage = copy_of(measured, tmp_path)
    argv = ["capacity", "--study", "small", "--storage", storage]
    argv += ["--results-dir", str(results), "--max-users", "32", "--users", "100"]
    assert main(argv) == 0
    out = capsys.readouterr()
    configs = read_capacity(results / "small").configs  # type: ignore[union-attr]
    pick, base = configs[0], configs[-1]
    assert f"{pick.label} pick (trial {pick.trial}): c={pick.capacity} users per replica" in out.out
    need = (replicas(100, pick.capacity), replicas(100, base.capacity))
    line = next(x for x in out.out.splitlines() if x.startswith("replicas for 100 users: "))
    assert f" {pick.label} {need[0]}," in line and line.endswith(f", {base.label} {need[1]}")
    assert f"{base.label}: c=1 held" in out.err  # progress goes to stderr


def test_a_request_rate_search_brackets_the_rate(measured: Measured, tmp_path: Path) -> None:
    results, storage = copy_of(measured, tmp_path)
    opts = CapacityOptions("small", storage, results, request_rate=True, max_rate=16.0)
    report = run_capacity(opts, report=lambda _: None)
    assert report.unit == "req/s" and report.in_flight == 256
    for c in report.configs:
        assert c.capacity and c.above and c.capacity < c.above <= c.capacity * 1.05 * 1.05
        assert sum(p.ok for p in c.runs_at(c.capacity)) >= 2


def test_an_unknown_study_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--study", "nope", "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no study 'nope'") and err.count("\n") == 1


def test_users_with_a_rate_search_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--study", "x", "--request-rate", "--users", "9"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
