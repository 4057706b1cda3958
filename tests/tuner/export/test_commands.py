"""commands.md: pasted into a real shell, the commands start the program with the exact argv.

``vllm`` and ``docker`` are stand-in executables on PATH that record the argv and env they got,
so the test checks what bash makes of the quoting (JSON flags, odd env values, secrets).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest

from tests.tuner.export.conftest import build_study, space_dict
from tuner.export import export_study
from tuner.export.commands import docker_groups
from tuner.export.configs import LaunchConfig, flag_groups
from tuner.space import render_engine_config
from tuner.space.schema import Space

API_KEY = "sk-test-0123456789abcdef"
HF = "hf_sentinelvalue_42"
NAMED = "hunter2-secret-by-name"
WEIRD = 'a b\'c"$HOME `x` {"k": 1}'
RECORDER = """#!{python}
import json, os, sys
with open(os.environ["CAPTURE"], "w") as fh:
    json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}}, fh)
"""


def secretive_space() -> dict[str, Any]:
    data = space_dict()
    data["engine"]["pass_env"] = ["HF_TOKEN"]
    data["target"] = {
        "kind": "docker",
        "gpus": ["0", "1"],
        "shm_size": "16g",
        "volumes": ["/data/hf:/root/.cache/huggingface"],
    }
    data["base"]["args"]["compilation-config"] = {"cudagraph_mode": "FULL", "sizes": [1, 2]}
    data["base"]["args"]["api-key"] = API_KEY
    data["base"]["env"] = {"VLLM_WEIRD": WEIRD, "MY_API_KEY": NAMED}
    return data


@pytest.fixture(scope="module")
def secretive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_TOKEN", HF)  # tune copies it into the engine's env (pass_env)
        yield _export_secretive(tmp_path_factory.mktemp("secretive") / "results")


def _export_secretive(results: Path) -> Path:
    url = build_study(results, secretive_space(), name="secretive")
    study = optuna.load_study(study_name="secretive", storage=url)
    leak = {"feasible": False, "failure_kind": "crash", "tiers": {}}
    leak["failure"] = f"engine crashed | auth failed for token {HF} and key {API_KEY}"
    study.add_trial(
        optuna.trial.create_trial(
            params=dict(study.trials[0].params),
            distributions=study.trials[0].distributions,
            values=[float("inf")] * 2,
            user_attrs=leak,
        )
    )
    export_study("secretive", None, None, results)
    return results / "secretive"


def _blocks(markdown: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", markdown, flags=re.S)


def _run(command: str, tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("vllm", "docker"):
        exe = bin_dir / name
        exe.write_text(RECORDER.format(python=sys.executable))
        exe.chmod(0o755)
    capture = tmp_path / "capture.json"
    full = {**os.environ, **env, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CAPTURE": str(capture)}
    subprocess.run(["bash", "-c", command], env=full, check=True, timeout=30)
    return dict(json.loads(capture.read_text()))


def _measured(results: Path, trial: int) -> LaunchConfig:
    """The launch the study actually ran for ``trial`` (secrets as the engine saw them)."""
    study = optuna.load_study(study_name="secretive", storage=f"sqlite:///{results}/study.db")
    from tuner.export.data import space_from_text

    space = space_from_text("secretive", study.user_attrs["space_yaml"])
    config = render_engine_config(space, study.trials[trial].params)
    return LaunchConfig(trial, list(config.command), list(config.args), dict(config.env))


def test_serve_commands_run_with_exact_flags_and_env(secretive: Path, tmp_path: Path) -> None:
    blocks = _blocks((secretive / "commands.md").read_text())
    serve = [b for b in blocks if "vllm serve" in b and not b.startswith("docker")]
    assert len(serve) == 2
    for block, trial in zip(serve, _recommended(secretive), strict=True):
        env = {"VLLM_API_KEY": API_KEY, "MY_API_KEY": NAMED, "HF_TOKEN": HF}
        got = _run(block, tmp_path, env)
        want = _measured(secretive, trial)
        assert got["argv"] == [*want.program[1:], *want.args]  # JSON and key intact
        assert got["env"]["VLLM_WEIRD"] == WEIRD
        assert got["env"]["HF_TOKEN"] == HF  # passed on by the shell, never written


def test_docker_commands_pass_devices_env_and_flags(secretive: Path, tmp_path: Path) -> None:
    blocks = [b for b in _blocks((secretive / "commands.md").read_text()) if b.startswith("docker")]
    got = _run(blocks[0], tmp_path, {"VLLM_API_KEY": API_KEY})
    argv = got["argv"]
    want = _measured(secretive, _recommended(secretive)[0])
    image = argv.index("vllm/vllm-openai:v0.17.1")
    assert argv[image + 1 :] == [want.program[2], *want.args]
    assert argv[argv.index("--gpus") + 1] == '"device=0,1"'
    assert argv[argv.index("--shm-size") + 1] == "16g"
    assert f"VLLM_WEIRD={WEIRD}" in argv and "HF_TOKEN" in argv and "MY_API_KEY" in argv
    assert "/data/hf:/root/.cache/huggingface" in argv


def test_no_secret_value_in_any_export_file(secretive: Path) -> None:
    files = [p for p in secretive.iterdir() if p.is_file() and p.name != "study.db"]
    assert {p.name for p in files} >= {"recipe.yaml", "commands.md", "report.html", "trials.csv"}
    for path in files:
        text = path.read_text()
        for secret in (API_KEY, HF, NAMED):
            assert secret not in text, f"{path.name} leaks a secret"
    csv = (secretive / "trials.csv").read_text()
    assert "auth failed for token <redacted> and key <redacted>" in csv
    assert '"${VLLM_API_KEY}"' in (secretive / "commands.md").read_text()


def test_ascend_target_gets_npu_devices_and_the_full_program() -> None:
    data = space_dict()
    data["engine"] = {"name": "vllm-ascend", "version": "0.14.0", "model": "org/m-w8a8"}
    data["target"] = {"kind": "docker", "npus": [str(i) for i in range(16)], "shm_size": "64g"}
    space = Space.model_validate(data)
    config = render_engine_config(space, {})
    launch = LaunchConfig(0, list(config.command), list(config.args), dict(config.env))
    groups = docker_groups(launch, space)
    words = [w for g in groups for w in g]
    davinci = [w for w in words if re.fullmatch(r"/dev/davinci\d+", w)]
    assert davinci == [f"/dev/davinci{i}" for i in range(16)]
    assert "/dev/davinci_manager" in words and "--gpus" not in words
    image = words.index("quay.io/ascend/vllm-ascend:v0.14.0")  # the version's default image
    assert words[image + 1 : image + 4] == ["vllm", "serve", "org/m-w8a8"]
    assert groups[-len(flag_groups(launch.args)) :] == flag_groups(launch.args)


def _recommended(results: Path) -> list[int]:
    text = (results / "commands.md").read_text()
    return [int(n) for n in re.findall(r"^Trial (\d+)\.", text, flags=re.M)]
