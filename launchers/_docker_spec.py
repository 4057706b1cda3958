"""What a docker launch asks the daemon for: the target settings and ``create()`` arguments.

Pure functions of the settings and the ``EngineConfig`` (no daemon needed), so tests check the
device, mount and label choices directly and on a created container's inspected config.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from launchers._cleanup import DEVICES, MANAGED, OWNER
from launchers._docker_devices import device_label, device_options
from launchers._engine import HttpEngineSettings
from tuner.engine import EngineConfig
from tuner.owner import owner_id

DEFAULT_CACHE_DIRS = [
    "/root/.cache/vllm",  # torch.compile artifacts and CUDA graphs keyed by config
    "/root/.cache/flashinfer",  # FlashInfer JIT kernels
    "/root/.triton",  # Triton kernels
    "/root/.nv",  # CUDA PTX JIT cache
    "/root/.deep_gemm",  # DeepGEMM JIT kernels
]
ASCEND_DRIVER_MOUNTS = [
    "/usr/local/Ascend/driver",
    "/usr/local/dcmi",
    "/usr/local/bin/npu-smi",
    "/etc/ascend_install.info",
]


class DockerSettings(HttpEngineSettings):
    """``target:`` settings of a containerised engine."""

    image: str = Field(description="Engine image, present locally (it is never pulled).")
    gpus: list[str] = Field(default_factory=list, description="NVIDIA GPU ids or UUIDs to use.")
    npus: list[int] = Field(default_factory=list, description="Ascend NPU ids (/dev/davinciN).")
    npu_visible_ids: Literal["logical", "physical"] = Field(
        "logical",
        description="ASCEND_RT_VISIBLE_DEVICES as the container numbers the mapped NPUs "
        "(0..n-1) or as the host does.",
    )
    ascend_driver_mounts: list[str] = Field(
        default_factory=lambda: list(ASCEND_DRIVER_MOUNTS),
        description="Host driver paths mounted read-only when NPUs are used.",
    )
    shm_size: str = Field("16g", description="Size of /dev/shm in the container.")
    volumes: list[str] = Field(
        default_factory=list,
        description="Mounts as HOST:CONTAINER[:ro|rw], like docker -v; a HOST starting with . "
        "is relative to the working directory, a bare name is a docker volume.",
    )
    same_path_volumes: list[str] = Field(
        default_factory=list,
        description="Host folders mounted read-only at their own absolute path (a relative one "
        "is resolved against the working directory): installs that name their own path, such "
        "as a virtual environment, whose scripts' shebangs name its python.",
    )
    model_cache: str | None = Field(
        None, description="Host model folder mounted at /root/.cache/huggingface."
    )
    cache_root: str | None = Field(
        "~/.cache/tune/engine",
        description="Host folder keeping compile/JIT caches across trials, relative to the "
        "working directory or absolute (null: none kept).",
    )
    cache_dirs: list[str] = Field(
        default_factory=lambda: list(DEFAULT_CACHE_DIRS),
        description="Compile/JIT cache folders kept across trials: CONTAINER (kept under "
        "cache_root) or HOST:CONTAINER.",
    )
    entrypoint: Literal["argv", "image"] = Field(
        "argv",
        description="argv: run the engine command as is; image: pass it to the image's entrypoint.",
    )
    server_info_path: str | None = Field(
        None, description="Path of the engine's config report (vLLM: /server_info, dev mode)."
    )
    init: bool = Field(
        True, description="Run docker's init as PID 1: forwards stop signals, reaps children."
    )
    stop_grace_s: int = Field(30, ge=0, description="Seconds between SIGTERM and SIGKILL on stop.")
    devices_free_timeout_s: float = Field(
        600.0, ge=0, description="Seconds to wait for the devices to be free before a start."
    )
    extra_docker_args: dict[str, Any] = Field(
        default_factory=dict, description="More docker SDK containers.create() keyword arguments."
    )

    @field_validator("volumes")
    @classmethod
    def _volume_syntax(cls, volumes: list[str]) -> list[str]:
        for spec in volumes:
            parts = spec.split(":")
            if len(parts) not in (2, 3) or not parts[1].startswith("/"):
                raise ValueError(f"volume {spec!r} is not HOST:/CONTAINER[:ro|rw]")
            if len(parts) == 3 and parts[2] not in ("ro", "rw"):
                raise ValueError(f"volume {spec!r}: mode must be ro or rw, got {parts[2]!r}")
        return volumes

    @field_validator("same_path_volumes")
    @classmethod
    def _one_path(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if ":" in path:
                raise ValueError(f"same-path volume {path!r} is one HOST path (no :CONTAINER)")
        return paths

    @field_validator("cache_dirs")
    @classmethod
    def _cache_syntax(cls, dirs: list[str]) -> list[str]:
        for spec in dirs:
            if len(spec.split(":")) > 2 or not spec.split(":")[-1].startswith("/"):
                raise ValueError(f"cache dir {spec!r} is not /CONTAINER or HOST:/CONTAINER")
        return dirs

    @model_validator(mode="after")
    def _one_accelerator_kind(self) -> DockerSettings:
        if self.gpus and self.npus:
            raise ValueError(f"give gpus or npus, not both (gpus={self.gpus}, npus={self.npus})")
        return self


def container_spec(settings: DockerSettings, config: EngineConfig) -> dict[str, Any]:
    """``containers.create()`` keyword arguments for one launch (no daemon needed)."""
    devices = _devices(settings, config)
    extra_env, device_kwargs, driver_binds = device_options(settings, devices)
    binds = {**driver_binds, **_cache_binds(settings), **_binds(settings.volumes)}
    binds |= same_path_binds(settings.same_path_volumes)
    if settings.model_cache:
        host = str(Path(settings.model_cache).expanduser())
        binds[host] = {"bind": "/root/.cache/huggingface", "mode": "rw"}
    argv = config.argv
    command = {"entrypoint": [argv[0]], "command": argv[1:]}
    if settings.entrypoint == "image":
        command = {"command": argv}
    return {
        "image": settings.image,
        "name": _name(config),
        **command,
        "environment": {**config.env, **extra_env},
        "labels": _labels(config, device_label(settings, devices)),
        "network_mode": "host",
        "ipc_mode": "host",
        "init": settings.init,
        "shm_size": settings.shm_size,
        "volumes": binds,
        **device_kwargs,
        **settings.extra_docker_args,
    }


def _devices(settings: DockerSettings, config: EngineConfig) -> list[str]:
    # EngineConfig.devices overrides the settings' ids (several engines sharing one node).
    if config.devices:
        return list(config.devices)
    return [str(n) for n in settings.npus] if settings.npus else list(settings.gpus)


def _binds(volumes: list[str]) -> dict[str, dict[str, str]]:
    out = {}
    for spec in volumes:
        host, container, *mode = spec.split(":")
        if host.startswith((".", "~", "/")):  # else a named docker volume, passed as is
            host = str(Path(host).expanduser().resolve())
        out[host] = {"bind": container, "mode": mode[0] if mode else "rw"}
    return out


def same_path_binds(paths: list[str]) -> dict[str, dict[str, str]]:
    # abspath, not resolve(): a shebang names the path the venv was made at, symlinks and all.
    absolute = [os.path.abspath(os.path.expanduser(path)) for path in paths]
    return {path: {"bind": path, "mode": "ro"} for path in absolute}


def _cache_binds(settings: DockerSettings) -> dict[str, dict[str, str]]:
    root = Path(settings.cache_root).expanduser().resolve() if settings.cache_root else None
    out = {}
    for spec in settings.cache_dirs:
        host, _, path = spec.rpartition(":")
        if host:
            folder = Path(host).expanduser().resolve()
        elif root is not None:
            folder = root / path.strip("/").replace("/", "_")
        else:
            continue  # no cache_root: only explicitly placed caches are kept
        folder.mkdir(parents=True, exist_ok=True)  # else docker creates it, root-owned
        out[str(folder)] = {"bind": path, "mode": "rw"}
    return out


def _labels(config: EngineConfig, devices: str) -> dict[str, str]:
    labels = {k if k.startswith("tune.") else f"tune.{k}": str(v) for k, v in config.labels.items()}
    return {**labels, MANAGED: "1", OWNER: owner_id(), DEVICES: devices}


def _name(config: EngineConfig) -> str:
    parts = [config.labels.get(k) or config.labels.get(f"tune.{k}") for k in ("study", "trial")]
    stem = "-".join(["tune", *[str(p) for p in parts if p], uuid.uuid4().hex[:6]])
    return re.sub(r"[^a-zA-Z0-9_.-]", "_", stem)
