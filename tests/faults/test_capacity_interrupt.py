"""An interrupted ``tune capacity`` leaves the previous complete answer in place: the configs it
measured wait in ``capacity.partial.json`` until a run measures every one."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.tuner.conftest import SMALL_SPACE
from tuner.capacity import CapacityOptions, run_capacity
from tuner.export.show import show_study
from tuner.run.study import RunOptions, run_study
from tuner.storage.capacity import FILE, PARTIAL


@pytest.fixture
def study(tmp_path: Path) -> CapacityOptions:
    space: dict[str, Any] = copy.deepcopy(SMALL_SPACE)
    space["slos"] = [{"metric": "p99_ttft_ms", "max": 1000.0}]
    space["parameters"]["max_num_seqs"]["default"] = 4  # defaults a tuned config beats
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    storage = f"journal:{tmp_path / 'journal.log'}"
    results = tmp_path / "r"
    opts = RunOptions(path, "p99_ttft", trials=3, results_dir=results, storage=storage, confirm=0)
    run_study(opts, report=lambda _: None)
    return CapacityOptions("small", storage, results, max_users=32)


def test_an_interrupted_run_keeps_the_last_complete_answer(study: CapacityOptions) -> None:
    # Before: capacity.json was rewritten after each config, so a stop mid-run left one
    # config there, unflagged, shown by tune show and the report as the answer.
    first = run_capacity(study, report=lambda _: None)
    assert len(first.configs) >= 2  # a pick and the defaults: a stop can fall between them
    folder = study.results_dir / "small"
    answer = (folder / FILE).read_text()
    shown = show_study("small", study.storage, study.results_dir)

    def stop_once_one_is_done(_: str) -> None:
        if (folder / PARTIAL).exists():
            raise KeyboardInterrupt("SIGTERM")

    with pytest.raises(KeyboardInterrupt):
        run_capacity(study, report=stop_once_one_is_done)
    assert (folder / FILE).read_text() == answer
    partial = json.loads((folder / PARTIAL).read_text())
    assert len(partial["configs"]) < len(first.configs)
    assert show_study("small", study.storage, study.results_dir) == shown
    run_capacity(study, report=lambda _: None)  # a run measuring every config replaces it
    assert not (folder / PARTIAL).exists()
    assert len(json.loads((folder / FILE).read_text())["configs"]) == len(first.configs)
