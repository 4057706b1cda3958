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
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from launchers import register
from launchers._base import Endpoint, Launcher, LauncherSettings
from launchers._docker_devices import busy_holders
from launchers._docker_spec import DockerSettings, container_spec
from launchers._knobs import KnobReport, record_knobs
from launchers._startup import (
    ExitInfo,
    LogCapture,
    port_in_use,
    probe_host,
    pump,
    secret_values,
    served_model,
    wait_until_ready,
)
from launchers.cleanup import DEVICES, docker_client, shielded, stop_on_exit
from tuner.engine import EngineConfig
from tuner.errors import FailureKind, LaunchError, TunerError

__all__ = ["DockerLauncher", "DockerSettings", "container_spec"]


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
        key = config.client_api_key
        wait_until_ready(
            base_url, model, timeout_s, self._exit_info, capture, self.settings.health_path, key
        )
        self.knob_report = record_knobs(
            config, capture.text(), capture.path.parent, self._server_info(base_url)
        )
        error = self.knob_report.error()
        if error is not None and self.settings.verify_knobs:
            raise error
        return Endpoint(model=model, base_url=base_url, api_key=key)

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


def _daemon_errors() -> tuple[type[Exception], ...]:
    """A daemon that stopped answering: the SDK lets transport errors through unwrapped."""
    import requests
    from docker.errors import DockerException

    return (requests.RequestException, DockerException)
