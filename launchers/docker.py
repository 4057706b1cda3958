"""``docker``: the engine in a container (vLLM on NVIDIA GPUs, vllm-ascend on Ascend NPUs).

One container per trial, created from ``settings.image`` with ``EngineConfig.argv`` as its
command line, on the host network and IPC namespace. Accelerators: NVIDIA GPUs through a device
request by id; Ascend NPUs through their device nodes, the driver's management nodes and
read-only driver mounts, with ``ASCEND_RT_VISIBLE_DEVICES``. Compile and JIT caches live under
``cache_root`` on the host, so a restart does not compile from cold.

Every container carries labels (``tune.managed``, owner, study, trial, devices): before a start
we wait until no other container of ours holds the same devices, and ``tune cleanup`` finds the
containers of a run that was killed. Ready means running, health 200 and one real completion;
an exit during start-up fails at once with exit code, OOM flag and log tail.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from launchers import register
from launchers._base import Endpoint, Launcher, LauncherSettings
from launchers._docker_devices import busy_holders, device_label, device_options
from launchers._http import (
    ExitInfo,
    LogCapture,
    port_in_use,
    probe_host,
    pump,
    secret_values,
    served_model,
    wait_until_ready,
)
from launchers._knobs import KnobReport, check_knobs
from launchers.cleanup import (
    DEVICES,
    MANAGED,
    OWNER,
    docker_client,
    owner_id,
    shielded,
    stop_on_exit,
)
from tuner.engine import EngineConfig
from tuner.errors import FailureKind, LaunchError, TunerError

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


class DockerSettings(LauncherSettings):
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
    model_cache: str | None = Field(
        None, description="Host model folder mounted at /root/.cache/huggingface."
    )
    cache_root: str | None = Field(
        "~/.cache/tune/engine",
        description="Host folder keeping compile/JIT caches across trials (null: none kept).",
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
    health_path: str = Field("/health", description="Path that answers 200 once up.")
    server_info_path: str | None = Field(
        None, description="Path of the engine's config report (vLLM: /server_info, dev mode)."
    )
    verify_knobs: bool = Field(
        True, description="Fail the trial (knob_ignored) when the engine reports a knob ignored."
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


@register
class DockerLauncher(Launcher):
    """A container per launch, removed by ``stop()`` whatever happened."""

    kind: ClassVar[str] = "docker"
    settings_model: ClassVar[type[LauncherSettings]] = DockerSettings
    settings: DockerSettings

    def __init__(self, settings: LauncherSettings) -> None:
        super().__init__(settings)
        self._client: Any = None
        self._container: Any = None
        self._capture: LogCapture | None = None
        self._reader: threading.Thread | None = None
        self._config: EngineConfig | None = None
        self.knob_report: KnobReport | None = None

    def start(self, config: EngineConfig, trial_dir: Path) -> None:
        if self._container is not None:
            raise RuntimeError("launcher already started; stop() it first")
        self._client = client = docker_client()
        self._require_image(client)
        spec = container_spec(self.settings, config)
        self._wait_devices_free(client, spec["labels"][DEVICES])
        if port_in_use(probe_host(config.host), config.port):
            raise LaunchError(
                f"port {config.port} on {config.host} is already in use "
                "(a leftover engine? `tune cleanup`)",
                kind=FailureKind.INFRA,
            )
        self._config = config
        self._capture = LogCapture(trial_dir / "engine.log", secret_values(config))
        stop_on_exit(self)  # first: it installs the SIGTERM handler that shielded() defers
        with shielded():  # a Ctrl-C between create and the bookkeeping must not orphan it
            self._container = self._api(client.containers.create, **spec)
        self._api(self._container.start)
        container = self._container
        self._reader = pump(lambda: container.logs(stream=True, follow=True), self._capture)

    def _require_image(self, client: Any) -> None:
        from docker.errors import ImageNotFound

        try:
            client.images.get(self.settings.image)
        except ImageNotFound:
            raise TunerError(
                f"docker image {self.settings.image!r} is not on this host; "
                "pull or load it first (images are never pulled during a study)"
            ) from None

    def _wait_devices_free(self, client: Any, devices: str) -> None:
        deadline = time.monotonic() + self.settings.devices_free_timeout_s
        while holders := busy_holders(client, devices):
            if time.monotonic() >= deadline:
                raise LaunchError(
                    f"devices {devices} still busy after {self.settings.devices_free_timeout_s:g}s:"
                    f" held by {', '.join(holders)}",
                    kind=FailureKind.INFRA,
                )
            time.sleep(1.0)

    def _api(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        from docker.errors import APIError

        try:
            return call(*args, **kwargs)
        except APIError as err:
            self.stop()
            explanation = err.explanation or str(err)
            message = f"docker refused the container: {explanation}"
            raise LaunchError(message, FailureKind.INFRA) from None

    def wait_ready(self, timeout_s: float) -> Endpoint:
        config, capture = self._config, self._capture
        if config is None or capture is None:
            raise RuntimeError("wait_ready() before start()")
        base_url = f"http://{probe_host(config.host)}:{config.port}"
        model = served_model(config)
        wait_until_ready(
            base_url, model, timeout_s, self._exit_info, capture, self.settings.health_path
        )
        self.knob_report = check_knobs(config, capture.text(), self._server_info(base_url))
        error = self.knob_report.error()
        if error is not None and self.settings.verify_knobs:
            raise error
        return Endpoint(model=model, base_url=base_url)

    def _server_info(self, base_url: str) -> dict[str, Any] | str | None:
        if self.settings.server_info_path is None:
            return None
        import httpx

        try:
            reply = httpx.get(base_url + self.settings.server_info_path, timeout=10)
            reply.raise_for_status()
        except httpx.HTTPError:
            return None  # not enabled on this engine: the start-up log still speaks
        try:
            body = reply.json()
        except ValueError:
            return reply.text
        return body if isinstance(body, dict) else reply.text

    def _exit_info(self) -> ExitInfo | None:
        from docker.errors import NotFound

        if self._container is None:
            return ExitInfo(code=-1)
        try:
            self._container.reload()
        except NotFound:
            return ExitInfo(code=-1)  # removed under us (`tune cleanup --force`)
        except _daemon_errors() as err:
            raise LaunchError(f"docker daemon lost: {err}", FailureKind.INFRA) from None
        state = self._container.attrs["State"]
        if state["Status"] in ("created", "running", "restarting"):
            return None
        if self._reader is not None:
            self._reader.join(timeout=2.0)  # the last lines carry the reason
        return ExitInfo(code=int(state["ExitCode"]), oom_killed=bool(state["OOMKilled"]))

    def logs(self) -> str:
        return self._capture.text() if self._capture is not None else ""

    def _remove(self, container: Any) -> None:
        from docker.errors import APIError, NotFound

        # Gone already, or never started: the removal below settles it.
        with contextlib.suppress(NotFound, APIError, *_daemon_errors()):
            container.stop(timeout=self.settings.stop_grace_s)
        try:
            container.remove(force=True)
        except NotFound:
            pass
        except (APIError, *_daemon_errors()) as err:
            if "already in progress" in str(err):
                return
            # stop() must not raise: say what is left and how to remove it.
            line = f"[tune] container {container.name} not removed ({err}); run `tune cleanup`\n"
            if self._capture is not None:
                self._capture.feed(line.encode())
            sys.stderr.write(line)

    def stop(self) -> None:
        with shielded():
            container, self._container = self._container, None
            if container is not None:
                self._remove(container)
            if self._reader is not None:
                self._reader.join(timeout=5.0)
            if self._capture is not None and not self._capture.ended.is_set():
                self._capture.finish()


def container_spec(settings: DockerSettings, config: EngineConfig) -> dict[str, Any]:
    """``containers.create()`` keyword arguments for one launch (no daemon needed)."""
    devices = _devices(settings, config)
    extra_env, device_kwargs, driver_binds = device_options(settings, devices)
    binds = {**driver_binds, **_cache_binds(settings), **_binds(settings.volumes)}
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


def _daemon_errors() -> tuple[type[Exception], ...]:
    """A daemon that stopped answering: the SDK lets transport errors through unwrapped."""
    import requests
    from docker.errors import DockerException

    return (requests.RequestException, DockerException)


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


def _cache_binds(settings: DockerSettings) -> dict[str, dict[str, str]]:
    root = Path(settings.cache_root).expanduser() if settings.cache_root else None
    out = {}
    for spec in settings.cache_dirs:
        host, _, path = spec.rpartition(":")
        if host:
            folder = Path(host).expanduser()
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
