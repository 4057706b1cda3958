"""The space digest a study is created with: what is measured changes it, fields added later
at their defaults do not, so a study created before them resumes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.run import context
from tuner.space import load_space


def digest(tmp_path: Path, **workload: object) -> str:
    data = copy.deepcopy(SMALL_SPACE)
    data["workload"].update(workload)
    name = "_".join(f"{k}{v}" for k, v in workload.items()) or "plain"
    return context._space_digest(load_space(write_yaml(tmp_path / f"{name}.yaml", data)))


@pytest.mark.parametrize(
    ("key", "value"), [("steady_state", True), ("stall_floor_s", 5.0), ("client_cpus", [1])]
)
def test_a_later_field_set_away_from_its_default_is_measured(
    tmp_path: Path, key: str, value: object
) -> None:
    assert digest(tmp_path, **{key: value}) != digest(tmp_path)


def test_later_fields_at_their_defaults_are_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = digest(tmp_path)
    monkeypatch.setattr(context, "LATER_WORKLOAD_DEFAULTS", {})
    assert digest(tmp_path) != before  # both fields sit in the workload at their defaults
    monkeypatch.setattr(context, "LATER_WORKLOAD_DEFAULTS", {"stall_floor_s": 120.0})
    assert digest(tmp_path) != before  # steady_state: False alone changes it too
