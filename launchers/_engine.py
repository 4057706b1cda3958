"""The launch lifecycle every launcher that starts an HTTP engine shares, whatever runs it.

``HttpEngineLauncher`` keeps the order of a launch in one place, so a container and a process
group are started, watched and stopped alike: the engine's port must be free, its output goes
to ``engine.log`` (redacted) from the moment it starts, readiness fails fast when it exits, and
the knobs it reports applied are checked once it serves. ``HttpEngineSettings`` holds the
``target:`` settings that lifecycle reads.
"""

from __future__ import annotations

import socket
import threading
from abc import abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from launchers._base import Endpoint, Launcher, LauncherSettings
from launchers._cleanup import stop_on_exit
from launchers._knobs import KnobReport, record_knobs
from launchers._startup import (
    ExitInfo,
    LogCapture,
    probe_host,
    pump,
    served_model,
    wait_until_ready,
)
from tuner.engine import EngineConfig
from tuner.errors import InfraError

LogStream = Callable[[], Iterable[bytes]]


class HttpEngineSettings(LauncherSettings):
    """``target:`` settings of every launcher that starts an HTTP engine."""

    health_path: str = Field("/health", description="Path that answers 200 once the engine is up.")
    verify_knobs: bool = Field(
        True, description="Fail the trial (knob_ignored) when the engine reports a knob ignored."
    )


class HttpEngineLauncher(Launcher):
    """Starts, watches and stops one HTTP engine; a subclass says how it runs.

    A subclass provides:

    - ``_holds_engine()``: whether it holds an engine not yet stopped (``start`` refuses then);
    - ``_launch(config)``: how to start the engine, holding signals (``shielded``) while a
      half-made start could orphan it; it raises with nothing left running;
    - ``_output()``: where its log comes from, the engine's output as byte chunks until it ends;
    - ``_exit_info()``: how to tell it exited: ``None`` while it runs, else its ``ExitInfo``;
    - ``_halt()``: how to stop it and everything it started, never raising for one gone;

    and may override ``_prepare(config)`` (checks before the port's: image present, devices
    free), ``_server_info(base_url)`` (the engine's own config report, which the knob check
    prefers to its log) and ``port_hint`` (what to do about a port in use).
    """

    settings: HttpEngineSettings
    port_hint: ClassVar[str] = ""

    def __init__(self, settings: LauncherSettings) -> None:
        super().__init__(settings)
        self._config: EngineConfig | None = None
        self._capture: LogCapture | None = None
        self._reader: threading.Thread | None = None
        self.knob_report: KnobReport | None = None

    def start(self, config: EngineConfig, trial_dir: Path) -> None:
        if self._holds_engine():
            raise RuntimeError("launcher already started; stop() it first")
        self._prepare(config)
        if port_in_use(probe_host(config.host), config.port):
            raise InfraError(
                f"port {config.port} on {config.host} is already in use{self.port_hint}"
            )
        self._config = config
        self._capture = LogCapture(trial_dir / "engine.log", config.secret_values())
        stop_on_exit(self)  # first: it installs the SIGTERM handler that shielded() defers
        self._launch(config)
        self._reader = pump(self._output(), self._capture)

    def wait_ready(self, timeout_s: float) -> Endpoint:
        config, capture = self._require_started()
        base_url = f"http://{probe_host(config.host)}:{config.port}"
        model = served_model(config)
        key = config.client_api_key
        health = self.settings.health_path
        wait_until_ready(base_url, model, timeout_s, self._exited, capture, health, key)
        self._check_knobs(config, capture, base_url)
        return Endpoint(model=model, base_url=base_url, api_key=key)

    def logs(self) -> str:
        return self._capture.text() if self._capture is not None else ""

    def stop(self) -> None:
        self._halt()
        # The engine is gone, so its stream ends: read the last lines before closing the log.
        if self._reader is not None:
            self._reader.join(timeout=5.0)
        if self._capture is not None and not self._capture.ended.is_set():
            self._capture.finish()

    @abstractmethod
    def _holds_engine(self) -> bool: ...

    @abstractmethod
    def _launch(self, config: EngineConfig) -> None: ...

    @abstractmethod
    def _output(self) -> LogStream: ...

    @abstractmethod
    def _exit_info(self) -> ExitInfo | None: ...

    @abstractmethod
    def _halt(self) -> None: ...

    def _prepare(self, config: EngineConfig) -> None:
        """Nothing to check before the port unless a subclass says so."""

    def _server_info(self, base_url: str) -> dict[str, Any] | str | None:
        return None  # the start-up log is all the knob check reads

    def _exited(self) -> ExitInfo | None:
        info = self._exit_info()
        if info is not None and self._reader is not None:
            self._reader.join(timeout=2.0)  # the last lines carry the reason
        return info

    def _check_knobs(self, config: EngineConfig, capture: LogCapture, base_url: str) -> None:
        self.knob_report = record_knobs(
            config, capture.text(), capture.path.parent, self._server_info(base_url)
        )
        error = self.knob_report.error()
        if error is not None and self.settings.verify_knobs:
            raise error

    def _require_started(self) -> tuple[EngineConfig, LogCapture]:
        if self._config is None or self._capture is None:
            raise RuntimeError("wait_ready() before start()")
        return self._config, self._capture


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on ``host:port`` (a leftover engine, say)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0
