"""The ``docker run`` command that starts what the docker launcher starts for a launch.

It mirrors ``container_spec`` (``launchers._docker_spec``) flag by flag: host network and IPC,
init, shm, GPUs by id (or Ascend device nodes, control nodes, driver mounts and
``ASCEND_RT_VISIBLE_DEVICES``), model and compile caches, the engine command as entrypoint and
arguments. The docker SDK options of ``extra_docker_args`` have no ``docker run`` flag here, and
are handed back beside the command.
"""

from __future__ import annotations

from pathlib import Path

from launchers._base import DeployCommand, Deployment, Group
from launchers._docker_devices import ASCEND_CONTROL_NODES
from launchers._docker_spec import DockerSettings, same_path_binds


def docker_run(s: DockerSettings, d: Deployment) -> DeployCommand:
    """``docker run`` words, one group per line, up to the engine's flags (which follow)."""
    groups: list[Group] = [("docker", "run", "--rm"), ("--network", "host", "--ipc", "host")]
    if s.init:
        groups.append(("--init",))
    groups.append(("--shm-size", s.shm_size))
    groups += _accelerators(s, d.all_gpus)
    groups += [("-v", v) for v in _volumes(s)]
    groups += [("-e", f"{k}={v}") for k, v in d.env.items()]
    groups += [("-e", name) for name in d.secret_env]  # docker copies it from your env
    if s.entrypoint == "argv":
        groups += [("--entrypoint", d.argv[0]), (s.image, *d.argv[1:])]
    else:
        groups.append((s.image, *d.argv))
    return DeployCommand(groups, dict(s.extra_docker_args))


def _accelerators(s: DockerSettings, all_gpus: bool) -> list[Group]:
    if s.npus:
        nodes = [f"/dev/davinci{n}" for n in s.npus] + ASCEND_CONTROL_NODES
        visible = s.npus if s.npu_visible_ids == "physical" else range(len(s.npus))
        groups: list[Group] = [("--device", f"{n}:{n}:rwm") for n in nodes]
        groups += [("-v", f"{p}:{p}:ro") for p in s.ascend_driver_mounts]
        return [*groups, ("-e", "ASCEND_RT_VISIBLE_DEVICES=" + ",".join(map(str, visible)))]
    if s.gpus:
        return [("--gpus", f'"device={",".join(s.gpus)}"')]
    return [("--gpus", "all")] if all_gpus else []


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
