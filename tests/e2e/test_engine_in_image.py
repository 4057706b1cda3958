"""A docker target's space is checked against the vLLM inside its image, before any trial.

The image (scripts/make_vllm_image.sh) runs vLLM's CPU build from /opt/vllm, a path this
machine does not have, so only the image can answer. A misspelt flag, a misspelt choice, a
misspelt sampled env variable and a wrong pinned version each stop ``tune run`` with one line
and no trial; the correct space starts its first trial with no warning. The image's answers
take a few minutes the first time (three imports of vLLM in a container), then come from the
cache keyed by the image's digest.
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.launchers.docker_env import ensure_daemon
from tests.launchers.helpers import free_port
from tests.vllm_cpu import REPO, make_model, require_venv
from tuner.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(1500)]

IMAGE = "tune-vllm:0.32.0-cpu"
SHIPPED_MODEL = REPO / ".cache" / "models" / "tiny-llama-8x512"


@pytest.fixture(scope="module")
def image() -> str:
    ensure_daemon()
    venv = require_venv()
    script = str(REPO / "scripts" / "make_vllm_image.sh")
    env = {"VENV": str(venv), "PATH": "/usr/bin:/bin"}
    built = subprocess.run(
        ["bash", script, IMAGE], capture_output=True, text=True, timeout=300, env=env
    )
    if built.returncode != 0:
        pytest.fail(f"building {IMAGE} failed:\n{built.stdout}{built.stderr}")
    return IMAGE


@pytest.fixture(scope="module")
def space(image: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The vLLM-on-CPU study in the image: eager, two tiny tiers, the venv at /opt/vllm/venv."""
    tmp = tmp_path_factory.mktemp("image")
    venv = require_venv()
    model = SHIPPED_MODEL if SHIPPED_MODEL.is_dir() else make_model(tmp / "model")
    text = (REPO / "search_spaces" / "vllm_cpu.yaml").read_text()
    data: dict[str, Any] = yaml.safe_load(text)
    prefix = str(Path(venv / "bin" / "python3").resolve().parents[1])
    data["engine"].update(model=str(model.resolve()), command=["vllm", "serve", "{model}"])
    data["engine"]["port"] = free_port()
    data["target"] = {
        "kind": "docker",
        "image": image,
        "entrypoint": "image",  # the image's entrypoint runs the probe as it runs a trial
        "volumes": ["/usr:/usr:ro", f"{prefix}:{prefix}:ro", f"{venv.resolve()}:/opt/vllm/venv:ro"],
        "same_path_volumes": [str(model.resolve())],
        "cache_root": str(tmp / "cache"),
        "cache_dirs": ["/root/.cache/vllm"],
        "shm_size": "2g",
        "stop_grace_s": 10,
    }
    for knob in ("execution", "optimization_level"):  # compiling takes a minute a start
        del data["parameters"][knob]
    data["base"]["args"]["enforce-eager"] = True
    data["workload"].update(num_prompts=2, warmup=1, tiers=[1], client_lag_limit_ms=2000)
    data["workload"]["dataset"].update(input_len=32, output_len=8)
    data["slos"] = [{"metric": "p99_ttft_ms", "max": 60000, "tiers": [1]}]
    return data


@pytest.fixture(autouse=True)
def facts_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # One cache for the module: the image is asked once, as a study's later runs would not ask.
    root = tmp_path_factory.getbasetemp() / "facts-cache"
    monkeypatch.setenv("TUNE_CACHE_DIR", str(root))


def run(tmp: Path, data: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = tmp / "space.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    args = ["run", "--space", str(path), "--trials", "1", "--confirm", "0"]
    code = main([*args, "--results-dir", str(tmp / "results")])
    shown = capsys.readouterr()
    return code, shown.out + shown.err


def changed(space: dict[str, Any], *path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(space)
    *parents, last = path
    node = data
    for key in parents:
        node = node[key]
    node[last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        (("parameters", "max_num_seqs", "flag"), "--max-num-seq",
         "parameters.max_num_seqs: vllm 0.32.0+cpu has no flag --max-num-seq"),
        (("base", "args", "kv-cache-dtype"), "fp9",
         "base.args.kv-cache-dtype: vllm 0.32.0+cpu does not take --kv-cache-dtype fp9"),
        (("parameters", "kv_cache_space", "env"), "VLLM_CPU_KVCACHE_SPAC",
         "parameters.kv_cache_space: vllm 0.32.0+cpu does not read env VLLM_CPU_KVCACHE_SPAC"),
        (("engine", "version"), "0.31.0",
         "engine.version: the space pins 0.31.0 but"),
    ],
)  # fmt: skip
def test_a_space_the_image_would_not_take_stops_before_the_first_trial(
    space: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    path: tuple[str, ...], value: str, said: str,
) -> None:  # fmt: skip
    code, shown = run(tmp_path, changed(space, *path, value=value), capsys)
    lines = shown.strip().splitlines()
    assert code == 2 and len(lines) == 1 and said in lines[0], shown
    assert not (tmp_path / "results").exists()  # no study, no trial


def test_the_correct_space_starts_its_first_trial_with_no_warning(
    space: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, shown = run(tmp_path, space, capsys)
    assert "warning" not in shown.lower(), shown
    assert code == 0, shown
    assert (tmp_path / "results" / "space" / "trials" / "0000").is_dir(), shown
