"""What the docker launcher asks the daemon for, checked without a daemon."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from launchers.docker import DockerSettings, container_spec
from tests.launchers.helpers import loopback_config


def spec(tmp_path: Path, **settings: Any) -> dict[str, Any]:
    config = loopback_config(8000, labels={"study": "s/1", "trial": "7"})
    model = DockerSettings.model_validate({"image": "img", "cache_root": str(tmp_path), **settings})
    return container_spec(model, config)


def test_argv_labels_and_namespaces(tmp_path: Path) -> None:
    out = spec(tmp_path)
    assert out["entrypoint"] == [sys.executable]  # argv[0], not the image's entrypoint
    assert out["command"][0].endswith("loopback_engine.py")
    assert out["command"][-2:] == ["--port", "8000"]
    assert out["labels"]["tune.study"] == "s/1" and out["labels"]["tune.trial"] == "7"
    assert out["labels"]["tune.managed"] == "1" and out["labels"]["tune.devices"] == ""
    assert out["name"].startswith("tune-s_1-7-")
    assert (out["network_mode"], out["ipc_mode"], out["init"]) == ("host", "host", True)
    assert "command" in spec(tmp_path, entrypoint="image") and "entrypoint" not in spec(
        tmp_path, entrypoint="image"
    )


def test_cache_dirs_under_root_or_placed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    placed = tmp_path / "placed"
    out = spec(tmp_path, cache_dirs=["/root/.triton", f"{placed}:/root/.cache"])
    assert out["volumes"][str(tmp_path / "root_.triton")]["bind"] == "/root/.triton"
    assert out["volumes"][str(placed)]["bind"] == "/root/.cache" and placed.is_dir()
    monkeypatch.chdir(tmp_path)
    relative = spec(tmp_path, cache_root="rel", cache_dirs=["/root/.nv"])
    assert relative["volumes"][str(tmp_path / "rel" / "root_.nv")]["bind"] == "/root/.nv"
    without_root = spec(tmp_path, cache_root=None, cache_dirs=["/root/.triton"])
    assert without_root["volumes"] == {}


def test_volumes_paths_and_named_volumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = spec(tmp_path, volumes=[".:/opt/tune:ro", "hf-cache:/root/.cache/huggingface"])
    assert out["volumes"][str(tmp_path)] == {"bind": "/opt/tune", "mode": "ro"}
    assert out["volumes"]["hf-cache"] == {"bind": "/root/.cache/huggingface", "mode": "rw"}


def test_same_path_volumes_mount_at_their_own_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A venv's bin/vllm starts with #!/its/absolute/path/bin/python3: elsewhere it cannot exec.
    monkeypatch.chdir(tmp_path)
    out = spec(tmp_path, volumes=[".:/opt/tune:ro"], same_path_volumes=[".cache/venv", "/abs"])
    venv = str(tmp_path / ".cache" / "venv")
    assert out["volumes"][venv] == {"bind": venv, "mode": "ro"}
    assert out["volumes"]["/abs"] == {"bind": "/abs", "mode": "ro"}
    assert out["volumes"][str(tmp_path)] == {"bind": "/opt/tune", "mode": "ro"}


def test_config_devices_override_settings(tmp_path: Path) -> None:
    config = loopback_config(8000, devices=("6", "7"))
    settings = DockerSettings.model_validate({"image": "i", "npus": ["0", "1"], "cache_root": None})
    out = container_spec(settings, config)
    assert out["labels"]["tune.devices"] == "ascend:6,7"
    assert out["environment"]["ASCEND_RT_VISIBLE_DEVICES"] == "0,1"
    physical = settings.model_copy(update={"npu_visible_ids": "physical"})
    assert container_spec(physical, config)["environment"]["ASCEND_RT_VISIBLE_DEVICES"] == "6,7"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"volumes": ["/a"]}, "is not HOST:/CONTAINER"),
        ({"volumes": ["/a:/b:rx"]}, "mode must be ro or rw"),
        ({"same_path_volumes": ["/a:/b"]}, "is one HOST path"),
        ({"cache_dirs": ["relative"]}, "is not /CONTAINER or HOST:/CONTAINER"),
        ({"gpus": ["0"], "npus": [0]}, "not both"),
        ({"ports": {"8000": 8000}}, "Extra inputs are not permitted"),
    ],
)
def test_bad_settings_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DockerSettings.model_validate({"image": "i", **settings})


def test_stop_survives_a_lost_daemon(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import docker

    from launchers.docker import DockerLauncher

    gone = docker.DockerClient(base_url=f"unix://{tmp_path}/no.sock", version="1.41")
    launcher = DockerLauncher(DockerSettings.model_validate({"image": "i"}))
    launcher._container = gone.containers.prepare_model({"Id": "abc", "Name": "/tune-x"})
    launcher.stop()  # must not raise: it says what is left instead
    launcher.stop()
    err = capsys.readouterr().err
    assert "container tune-x not removed" in err and "tune cleanup" in err
