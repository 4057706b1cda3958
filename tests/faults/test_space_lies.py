"""A space file that would mislead or exhaust the tool is refused at load, in one line naming
the file, the YAML path and the rule: an alias bomb, a huge file, a key given twice, two
parameters on one flag, numbers that are not finite or not sane."""

from __future__ import annotations

import copy
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.faults.procs import REPO
from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.errors import SpaceError
from tuner.space import load_space


def refusal(path: Path) -> str:
    with pytest.raises(SpaceError) as caught:
        load_space(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    return text


def small_text() -> str:
    return yaml.safe_dump(SMALL_SPACE, sort_keys=False)


def bomb(levels: int) -> str:
    """Each anchor names the one before it ten times: 10**levels values in a few KB."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    return "sim:\n" + "\n".join("  " + line for line in lines) + "\n"


def _limit_memory() -> None:  # without the limits, the bomb would take the machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (1536 * 1024 * 1024, 1536 * 1024 * 1024))


def test_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    # Before: pydantic-core panicked at 2 GB on a 5 KB space.
    path = tmp_path / "bomb.yaml"
    path.write_text(small_text() + bomb(9))
    assert len(path.read_bytes()) < 5000
    cmd = [sys.executable, "-m", "tuner", "run", "--space", str(path), "--launcher", "sim"]
    done = subprocess.run(
        [*cmd, "--results-dir", str(tmp_path / "r")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith(f"error: {path}: its aliases expand to")
    assert done.stderr.count("\n") == 1


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text(small_text() + "sim: &s {profile: h200x4, again: *s}\n")
    assert "an alias is used inside the anchor it names" in refusal(path)


def test_a_huge_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(small_text() + "# " + "x" * (2 * 1024 * 1024) + "\n")
    assert "larger than 1024 KiB" in refusal(path)


def test_a_top_level_key_given_twice_is_refused(tmp_path: Path) -> None:
    # Before: the last one won silently.
    path = tmp_path / "twice.yaml"
    path.write_text(small_text() + "study: {objective: p99_ttft, trials: 3}\n")
    text = refusal(path)
    assert "study: given twice (line" in text


def test_a_nested_key_given_twice_names_its_path(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    text = small_text().replace("    num_prompts: 8\n", "    num_prompts: 8\n    num_prompts: 80\n")
    path.write_text(text.replace("  num_prompts: 8\n", "  num_prompts: 8\n  num_prompts: 80\n"))
    assert "workload.num_prompts: given twice" in refusal(path)


def test_merge_keys_still_override() -> None:
    from tuner.space.yaml_text import read_yaml_text

    data = read_yaml_text("base: &b {a: 1, b: 2}\nmine:\n  <<: *b\n  b: 3\n")
    assert data["mine"] == {"a": 1, "b": 3}


def with_param(name: str, binding: dict[str, Any]) -> dict[str, Any]:
    space = copy.deepcopy(SMALL_SPACE)
    space["parameters"][name] = {"type": "categorical", "choices": [1, 2], "default": 1, **binding}
    return space


@pytest.mark.parametrize(
    ("binding", "said"),
    [
        ({"flag": "--max-num-seqs"}, "binds flag --max-num-seqs, as parameters.max_num_seqs"),
        ({"flag": "--max_num_seqs"}, "binds flag --max-num-seqs, as parameters.max_num_seqs"),
    ],
)
def test_two_parameters_on_one_flag_are_refused(
    tmp_path: Path, binding: dict[str, Any], said: str
) -> None:
    # Before: the launch used the second's value while the trial recorded the first's.
    path = write_yaml(tmp_path / "s.yaml", with_param("seqs_again", binding))
    assert f"parameters.seqs_again: {said} does" in refusal(path)


def test_a_json_key_and_its_whole_flag_are_refused(tmp_path: Path) -> None:
    space = with_param("spec_n", {"json": {"flag": "--speculative-config", "key": "n"}})
    space["parameters"]["spec_whole"] = {
        "type": "categorical",
        "choices": ["{}"],
        "default": "{}",
        "flag": "--speculative-config",
    }
    path = write_yaml(tmp_path / "s.yaml", space)
    assert "parameters.spec_whole: binds flag --speculative-config" in refusal(path)
    del space["parameters"]["spec_whole"]
    space["parameters"]["spec_m"] = copy.deepcopy(space["parameters"]["spec_n"])
    space["parameters"]["spec_m"]["json"]["key"] = "m"
    load_space(write_yaml(tmp_path / "ok.yaml", space))  # two keys of one JSON flag: fine


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ("slos: [{metric: p99_ttft_ms, max: .nan}]", "slos[0].max (nan): not a finite number"),
        ("workload: {request_timeout_s: .inf}", "workload.request_timeout_s (inf): not a finite"),
        ("base: {args: {gpu-memory-utilization: .nan}}", "base.args.gpu-memory-utilization (nan)"),
    ],
)
def test_non_finite_numbers_are_refused_with_their_path(
    tmp_path: Path, edit: str, said: str
) -> None:
    # Before: an SLO max of .nan never fired; a request timeout of .inf crashed a trial.
    data = copy.deepcopy(SMALL_SPACE)
    for key, value in yaml.safe_load(edit).items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    path = tmp_path / "nan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert said in refusal(path)


@pytest.mark.parametrize(
    ("dataset", "said"),
    [
        (
            {"kind": "code_edit", "num_files": 2, "file_len": 10_000_000_000, "edits": 2},
            "workload.dataset.file_len (10000000000) is over 16,777,216 tokens",
        ),
        (
            {"kind": "random", "input_len": 1_000_000, "output_len": 8},
            "would build 8,000,000,000 prompt tokens",
        ),
    ],
)
def test_absurd_sizes_are_refused_at_load(
    tmp_path: Path, dataset: dict[str, Any], said: str
) -> None:
    # Before: file_len 10000000000 was a numpy MemoryError mid-trial.
    space = copy.deepcopy(SMALL_SPACE)
    space["workload"]["dataset"] = {"output_len": 8, **dataset}
    space["workload"]["num_prompts"] = 8000 if dataset["kind"] == "random" else 4
    assert said in refusal(write_yaml(tmp_path / "big.yaml", space))
