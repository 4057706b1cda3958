"""commands.md: pasted into a real shell, the commands start the program with the exact argv.

``vllm`` and ``docker`` are stand-in executables on PATH that record the argv and env they got,
so the test checks what bash makes of the quoting (JSON flags, odd env values, secrets).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest

from launchers.docker import DockerSettings, container_spec
from tests.tuner.export.conftest import SERVE_HOST, build_study, deployed, space_dict
from tests.tuner.export.shell import run_pasted as _run
from tuner.engine import EngineConfig
from tuner.export import export_study
from tuner.export.configs import LaunchConfig
from tuner.export.docker_run import docker_groups
from tuner.space import render_engine_config
from tuner.space.schema import Space
from tuner.storage.study_data import space_from_text

API_KEY = "sk-test-0123456789abcdef"
HF = "hf_sentinelvalue_42"
NAMED = "hunter2-secret-by-name"
WEIRD = 'a b\'c"$HOME `x` {"k": 1}'


def secretive_space() -> dict[str, Any]:
    data = space_dict()
    data["engine"]["pass_env"] = ["HF_TOKEN"]
    data["target"] = {
        "kind": "docker",
        "image": "vllm/vllm-openai:v0.17.1",
        "gpus": ["0", "1"],
        "shm_size": "16g",
        "volumes": ["/data/hf:/root/.cache/huggingface:ro"],
        "cache_root": None,
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


def _measured(results: Path, trial: int, idle: dict[str, Any] | None = None) -> LaunchConfig:
    """The launch the study actually ran for ``trial`` (secrets as the engine saw them), with
    the knobs ``idle`` names (that cannot act at the pick's tier) at the space's defaults."""
    study = optuna.load_study(study_name="secretive", storage=f"sqlite:///{results}/study.db")
    space = space_from_text("secretive", study.user_attrs["space_yaml"])
    params = dict(study.trials[trial].params)
    params.update({k: space.parameters[k].default for k in idle or {}})
    config = render_engine_config(space, params)
    return LaunchConfig(trial, list(config.command), list(config.args), dict(config.env))


def _idle(results: Path) -> list[dict[str, Any]]:
    """Per tier, the knobs its pick's trial ran with that it deploys at the defaults."""
    tiers = json.loads((results / "recommendations.json").read_text())["tiers"]
    return [t["idle"] for t in tiers if t["trial"] is not None]


def test_serve_commands_run_with_exact_flags_and_env(secretive: Path, tmp_path: Path) -> None:
    blocks = _blocks((secretive / "commands.md").read_text())
    serve = [b for b in blocks if "vllm serve" in b and not b.startswith("docker")]
    trials = [*_recommended(secretive), 0]  # each tier's pick, then the baseline
    idle = [*_idle(secretive), {}]
    assert len(serve) == len(trials) == len(idle) == 3
    for block, trial, knobs in zip(serve, trials, idle, strict=True):
        env = {"VLLM_API_KEY": API_KEY, "MY_API_KEY": NAMED, "HF_TOKEN": HF}
        got = _run(block, tmp_path, env)
        want = _measured(secretive, trial, knobs)
        assert got["argv"] == [*want.program[1:], *deployed(want.args)]  # JSON and key intact
        assert got["env"]["VLLM_WEIRD"] == WEIRD
        assert got["env"]["HF_TOKEN"] == HF  # passed on by the shell, never written


def _docker_run(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """What ``docker run`` would create from ``argv``, in container_spec's terms."""
    out: dict[str, Any] = {"environment": {}, "volumes": {}, "devices": [], "flags": set()}
    i = 2  # after "run"
    while argv[i].startswith("-"):
        flag = argv[i]
        if flag in ("--rm", "--init"):
            out["flags"].add(flag)
            i += 1
            continue
        value = argv[i + 1]
        i += 2
        if flag == "-e":
            key, eq, val = value.partition("=")
            out["environment"][key] = val if eq else env[key]
        elif flag == "-v":
            host, bind, mode = value.split(":")
            out["volumes"][host] = {"bind": bind, "mode": mode}
        elif flag == "--device":
            out["devices"].append(value)
        else:
            out[flag] = value
    out["image"], out["command"] = argv[i], argv[i + 1 :]
    return out


def test_docker_command_starts_what_the_docker_launcher_starts(
    secretive: Path, tmp_path: Path
) -> None:
    blocks = [b for b in _blocks((secretive / "commands.md").read_text()) if b.startswith("docker")]
    env = {"VLLM_API_KEY": API_KEY, "MY_API_KEY": NAMED, "HF_TOKEN": HF}
    got = _docker_run(_run(blocks[0], tmp_path, env)["argv"], env)
    trial = _recommended(secretive)[0]
    spec = container_spec(
        DockerSettings.model_validate(_target()),
        _engine_config(secretive, trial, env, _idle(secretive)[0]),
    )
    assert got["image"] == spec["image"] and got["--entrypoint"] == spec["entrypoint"][0]
    assert got["command"] == spec["command"]  # JSON flags and the API key intact
    assert got["environment"] == spec["environment"]
    assert got["volumes"] == spec["volumes"]
    assert got["--gpus"] == '"device=0,1"' and spec["device_requests"][0].device_ids == ["0", "1"]
    assert (got["--network"], got["--ipc"], got["--shm-size"]) == ("host", "host", "16g")
    assert "--init" in got["flags"]


def _target() -> dict[str, Any]:
    target = dict(secretive_space()["target"])
    target.pop("kind")
    return target


def _engine_config(
    results: Path, trial: int, env: dict[str, str], idle: dict[str, Any]
) -> EngineConfig:
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        study = optuna.load_study(study_name="secretive", storage=f"sqlite:///{results}/study.db")
        space = space_from_text("secretive", study.user_attrs["space_yaml"])
        params = dict(study.trials[trial].params)
        params.update({k: space.parameters[k].default for k in idle})
        return render_engine_config(space, params, host=SERVE_HOST)


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


def test_ascend_target_matches_the_launchers_devices_and_mounts(tmp_path: Path) -> None:
    data = space_dict()
    data["engine"] = {"name": "vllm-ascend", "version": "0.14.0", "model": "org/m-w8a8"}
    target = {"image": "ascend:1", "npus": list(range(8, 16)), "cache_root": str(tmp_path)}
    data["target"] = {"kind": "docker", **target}
    space = Space.model_validate(data)
    config = render_engine_config(space, {})
    launch = LaunchConfig(0, list(config.command), list(config.args), dict(config.env))
    words = [w for g in docker_groups(launch, space) for w in g]
    got = _docker_run(words, {})
    spec = container_spec(DockerSettings.model_validate(target), config)
    assert got["devices"] == spec["devices"]
    assert "/dev/davinci15:/dev/davinci15:rwm" in got["devices"] and "--gpus" not in got
    assert got["environment"] == spec["environment"]  # ASCEND_RT_VISIBLE_DEVICES=0..7
    assert got["volumes"] == spec["volumes"]  # driver mounts (ro) and compile caches
    assert [got["--entrypoint"], got["image"], *got["command"]] == [
        *spec["entrypoint"],
        spec["image"],
        *spec["command"],
    ]


def test_space_without_docker_target_gets_the_engines_usual_image() -> None:
    space = Space.model_validate(space_dict())  # target: sim
    config = render_engine_config(space, {})
    launch = LaunchConfig(0, list(config.command), list(config.args), dict(config.env))
    got = _docker_run([w for g in docker_groups(launch, space) for w in g], {})
    assert got["image"] == "vllm/vllm-openai:v0.17.1" and got["--gpus"] == "all"


def test_a_local_engine_command_is_not_the_images_entrypoint() -> None:
    data = space_dict()
    data["engine"]["command"] = [".cache/venv/bin/vllm", "serve", "{model}"]
    data["target"] = {"kind": "process"}
    space = Space.model_validate(data)
    config = render_engine_config(space, {})
    launch = LaunchConfig(0, list(config.command), list(config.args), dict(config.env))
    words = [w for g in docker_groups(launch, space) for w in g]
    assert ".cache/venv/bin/vllm" not in words
    assert words[words.index("--entrypoint") + 1 : words.index("--entrypoint") + 4] == [
        "vllm", "vllm/vllm-openai:v0.17.1", "serve"
    ]  # fmt: skip


def _recommended(results: Path) -> list[int]:
    text = (results / "commands.md").read_text()
    return [int(n) for n in re.findall(r"^Trial (\d+)\.", text, flags=re.M)]
