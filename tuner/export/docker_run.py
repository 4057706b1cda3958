"""The ``docker run`` equivalent of what the docker launcher starts for a launch.

It mirrors ``launchers.docker.container_spec`` flag by flag: host network and IPC, init, shm,
GPUs by id (or Ascend device nodes, control nodes, driver mounts and
``ASCEND_RT_VISIBLE_DEVICES``), model and compile caches, the engine command as entrypoint and
arguments. A study that ran elsewhere (``--launcher sim``) still gets the command for its
space's docker target; a space with no docker target gets one for the engine's usual image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launchers._docker_devices import ASCEND_CONTROL_NODES
from launchers._docker_spec import same_path_binds
from launchers.docker import DockerSettings
from tuner.export.configs import Group, LaunchConfig, flag_groups
from tuner.space.schema import Space

DEFAULT_IMAGES = {
    "vllm": "vllm/vllm-openai:v{version}",
    "vllm-ascend": "quay.io/ascend/vllm-ascend:v{version}",
    "llama.cpp": "ghcr.io/ggml-org/llama.cpp:server",
}


def image_of(space: Space) -> str:
    image = space.target.settings().get("image") if space.target.kind == "docker" else None
    image = image or space.engine.image
    return str(image or DEFAULT_IMAGES[space.engine.name].format(version=space.engine.version))


def docker_settings(space: Space) -> DockerSettings:
    if space.target.kind == "docker":
        return DockerSettings.model_validate(space.target.settings())
    target: dict[str, Any] = {"image": image_of(space)}
    if space.engine.name == "vllm-ascend":
        target["npus"] = list(range(_tp(space)))
    return DockerSettings.model_validate(target)


def _tp(space: Space) -> int:
    args = space.base.args
    value = args.get("tensor-parallel-size", args.get("--tensor-parallel-size"))
    return int(value) if isinstance(value, int | str) and str(value).isdigit() else 1


def docker_groups(launch: LaunchConfig, space: Space) -> list[Group]:
    """``docker run`` words, one group per line, for ``launch`` on the space's docker target."""
    s = docker_settings(space)
    groups: list[Group] = [("docker", "run", "--rm"), ("--network", "host", "--ipc", "host")]
    if s.init:
        groups.append(("--init",))
    groups.append(("--shm-size", s.shm_size))
    # A docker target with no devices is a CPU engine; an exported image needs its GPUs.
    groups += _accelerators(s, default_gpus=space.target.kind != "docker")
    groups += [("-v", v) for v in _volumes(s)]
    groups += [("-e", f"{k}={v}") for k, v in launch.env.items()]
    groups += [("-e", name) for name in launch.secret_env]  # docker copies it from your env
    # A study that ran a local command (a venv's vllm, say): the engine's image has its own.
    argv = launch.program if space.target.kind == "docker" else space.engine.argv_prefix(True)
    if s.entrypoint == "argv":
        groups += [("--entrypoint", argv[0]), (s.image, *argv[1:])]
    else:
        groups.append((s.image, *argv))
    return groups + flag_groups(launch.args)


def unrendered(space: Space) -> dict[str, Any]:
    """Docker SDK options of the target that have no ``docker run`` flag here."""
    return dict(docker_settings(space).extra_docker_args)


def _accelerators(s: DockerSettings, default_gpus: bool) -> list[Group]:
    if s.npus:
        nodes = [f"/dev/davinci{n}" for n in s.npus] + ASCEND_CONTROL_NODES
        visible = s.npus if s.npu_visible_ids == "physical" else range(len(s.npus))
        groups: list[Group] = [("--device", f"{n}:{n}:rwm") for n in nodes]
        groups += [("-v", f"{p}:{p}:ro") for p in s.ascend_driver_mounts]
        return [*groups, ("-e", "ASCEND_RT_VISIBLE_DEVICES=" + ",".join(map(str, visible)))]
    if s.gpus:
        return [("--gpus", f'"device={",".join(s.gpus)}"')]
    return [("--gpus", "all")] if default_gpus else []


def _volumes(s: DockerSettings) -> list[str]:
    out = []
    if s.cache_root is not None:
        root = Path(s.cache_root).expanduser()
        out += [f"{root / p.strip('/').replace('/', '_')}:{p}:rw" for p in s.cache_dirs]
    for spec in s.volumes:
        host, container, *mode = spec.split(":")
        out.append(f"{Path(host).expanduser()}:{container}:{mode[0] if mode else 'rw'}")
    if s.model_cache:
        out.append(f"{Path(s.model_cache).expanduser()}:/root/.cache/huggingface:rw")
    out += [f"{host}:{host}:ro" for host in same_path_binds(s.same_path_volumes)]
    return out
