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
import time
from typing import Any, ClassVar

from launchers import _cleanup, register
from launchers._base import DeployCommand, Deployment, LauncherSettings, Leftover, Report
from launchers._cleanup import (
    DEVICES,
    MANAGED,
    clear_dead_runs,
    remove_leftovers,
    shielded,
)
from launchers._docker_devices import busy_holders
from launchers._docker_facts import image_facts
from launchers._docker_run import docker_run
from launchers._docker_spec import DockerSettings, container_spec
from launchers._engine import HttpEngineLauncher, LogStream
from launchers._gpu_check import check_gpus
from launchers._npu_check import check_npus
from launchers._startup import ExitInfo
from launchers._vllm_facts import EngineFacts
from objectives.answer import fetch_sync
from tuner.engine import EngineConfig
from tuner.errors import InfraError, TunerError

__all__ = ["DockerLauncher", "DockerSettings", "container_spec"]


@register
class DockerLauncher(HttpEngineLauncher):
    """A container per launch, removed by ``stop()`` whatever happened."""

    kind: ClassVar[str] = "docker"
    settings_model: ClassVar[type[LauncherSettings]] = DockerSettings
    settings: DockerSettings
    port_hint: ClassVar[str] = " (a leftover engine? `tune cleanup`)"

    def __init__(self, settings: LauncherSettings) -> None:
        super().__init__(settings)
        self._client: Any = None
        self._spec: dict[str, Any] = {}
        self._container: Any = None

    @classmethod
    def clear_leftovers(cls, study: str, report: Report) -> None:
        clear_dead_runs(study, report)

    @classmethod
    def remove_leftovers(cls, study: str | None, force: bool = False) -> list[Leftover]:
        return remove_leftovers(_cleanup.docker_client(), study=study, force=force)

    @classmethod
    def deploy_command(cls, settings: LauncherSettings, deployment: Deployment) -> DeployCommand:
        assert isinstance(settings, DockerSettings)
        return docker_run(settings, deployment)

    @classmethod
    def check_devices(cls, settings: LauncherSettings) -> list[str]:
        assert isinstance(settings, DockerSettings)
        if not settings.gpus and not settings.npus:
            return []
        ours = frozenset(c.id for c in _cleanup.docker_client().containers.list(
            all=True, filters={"label": [MANAGED]}
        ))  # fmt: skip
        if settings.npus:
            return check_npus(list(settings.npus), ours)
        return check_gpus(list(settings.gpus), ours)

    @classmethod
    def engine_facts(cls, settings: LauncherSettings, prefix: list[str]) -> EngineFacts:
        assert isinstance(settings, DockerSettings)
        return image_facts(settings, prefix)

    def _holds_engine(self) -> bool:
        return self._container is not None

    def _prepare(self, config: EngineConfig) -> None:
        self._client = client = _cleanup.docker_client()
        self._require_image(client)
        self._spec = container_spec(self.settings, config)
        self._wait_devices_free(client, self._spec["labels"][DEVICES])

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
                raise InfraError(
                    f"devices {devices} still busy after {self.settings.devices_free_timeout_s:g}s:"
                    f" held by {', '.join(holders)}"
                )
            time.sleep(1.0)

    def _launch(self, config: EngineConfig) -> None:
        with shielded():  # a Ctrl-C between create and the bookkeeping must not orphan it
            self._container = self._api(self._client.containers.create, **self._spec)
        self._api(self._container.start)

    def _api(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        from docker.errors import APIError

        try:
            return call(*args, **kwargs)
        except APIError as err:
            self.stop()
            explanation = err.explanation or str(err)
            message = f"docker refused the container: {explanation}"
            raise InfraError(message) from None

    def _output(self) -> LogStream:
        container = self._container
        return lambda: container.logs(stream=True, follow=True)

    def _server_info(self, base_url: str) -> dict[str, Any] | str | None:
        if self.settings.server_info_path is None:
            return None
        import httpx

        try:
            reply = fetch_sync("GET", base_url + self.settings.server_info_path, 10.0)
            reply.raise_for_status()
        except httpx.HTTPError:
            return None  # not enabled on this engine: the start-up log still speaks
        try:
            body = reply.json()
        except (ValueError, RecursionError):  # nested past json's depth: not a report either
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
            raise InfraError(f"docker daemon lost: {err}") from None
        state = self._container.attrs["State"]
        if state["Status"] in ("created", "running", "restarting"):
            return None
        return ExitInfo(code=int(state["ExitCode"]), oom_killed=bool(state["OOMKilled"]))

    def _halt(self) -> None:
        with shielded():  # a second Ctrl-C during the removal must not orphan the container
            container, self._container = self._container, None
            if container is not None:
                self._remove(container)

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


def _daemon_errors() -> tuple[type[Exception], ...]:
    """A daemon that stopped answering: the SDK lets transport errors through unwrapped."""
    import requests
    from docker.errors import DockerException

    return (requests.RequestException, DockerException)
