"""``process``: the engine as a local command (argv, never a shell) in its own process group.

The command comes from ``EngineConfig.argv`` and runs with the tuner's environment plus
``EngineConfig.env``. Its stdout and stderr go, merged and redacted, to ``engine.log``. It is
started in a new session, so ``stop()`` reaches every process it spawned (vLLM's API server,
engine core and workers): SIGTERM to the group, SIGKILL after ``stop_grace_s``.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from launchers import register
from launchers._base import Endpoint, Launcher, LauncherSettings
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
from launchers.cleanup import shielded, stop_on_exit
from tuner.engine import EngineConfig
from tuner.errors import FailureKind, LaunchError, TunerError


class ProcessSettings(LauncherSettings):
    """``target:`` settings of a local command."""

    cwd: Path | None = Field(None, description="Working directory of the command (default: ours).")
    health_path: str = Field("/health", description="Path that answers 200 once the engine is up.")
    stop_grace_s: float = Field(
        15.0, ge=0, description="Seconds between SIGTERM and SIGKILL to the process group on stop."
    )
    verify_knobs: bool = Field(
        True, description="Fail the trial (knob_ignored) when the engine reports a knob ignored."
    )


@register
class ProcessLauncher(Launcher):
    """A local engine command, owned from ``start`` until ``stop``."""

    kind: ClassVar[str] = "process"
    settings_model: ClassVar[type[LauncherSettings]] = ProcessSettings
    settings: ProcessSettings

    def __init__(self, settings: LauncherSettings) -> None:
        super().__init__(settings)
        self._proc: subprocess.Popen[bytes] | None = None
        self._capture: LogCapture | None = None
        self._reader: threading.Thread | None = None
        self._config: EngineConfig | None = None
        self.knob_report: KnobReport | None = None

    def start(self, config: EngineConfig, trial_dir: Path) -> None:
        if self._proc is not None:
            raise RuntimeError("launcher already started; stop() it first")
        if port_in_use(probe_host(config.host), config.port):
            raise LaunchError(
                f"port {config.port} on {config.host} is already in use; "
                "stop whatever listens there (or `tune cleanup`)",
                kind=FailureKind.INFRA,
            )
        self._config = config
        self._capture = LogCapture(trial_dir / "engine.log", secret_values(config))
        stop_on_exit(self)  # first: it installs the SIGTERM handler that shielded() defers
        with shielded():  # a Ctrl-C inside Popen must not leave a child nobody tracks
            self._proc = self._spawn(config)
        stdout = self._proc.stdout
        assert isinstance(stdout, io.BufferedReader)
        # read1: whatever is there now, so lines reach engine.log as they are printed.
        self._reader = pump(lambda: iter(lambda: stdout.read1(65536), b""), self._capture)

    def _spawn(self, config: EngineConfig) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(
                config.argv,
                env={**os.environ, **config.env},
                cwd=self.settings.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() reaches every child
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as err:
            assert self._capture is not None
            self._capture.finish()
            raise TunerError(f"cannot run engine command {config.argv[0]!r}: {err}") from None

    def wait_ready(self, timeout_s: float) -> Endpoint:
        config, capture = self._require_started()
        base_url = f"http://{probe_host(config.host)}:{config.port}"
        model = served_model(config)
        key = config.client_api_key
        wait_until_ready(
            base_url, model, timeout_s, self._exit_info, capture, self.settings.health_path, key
        )
        self.knob_report = record_knobs(config, capture.text(), capture.path.parent)
        error = self.knob_report.error()
        if error is not None and self.settings.verify_knobs:
            raise error
        return Endpoint(model=model, base_url=base_url, api_key=key)

    def logs(self) -> str:
        return self._capture.text() if self._capture is not None else ""

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.settings.stop_grace_s
        try:
            proc.wait(timeout=self.settings.stop_grace_s)
            # Children may outlive the leader: wait for the group, then kill what is left.
            _wait_gone(proc.pid, deadline - time.monotonic())
        except subprocess.TimeoutExpired:
            pass
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        self._finish_log()

    def _finish_log(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5.0)
        if self._capture is not None and not self._capture.ended.is_set():
            self._capture.finish()

    def _exit_info(self) -> ExitInfo | None:
        if self._proc is None:
            return ExitInfo(code=-1)
        code = self._proc.poll()
        if code is None:
            return None
        if self._reader is not None:
            self._reader.join(timeout=2.0)  # the last lines carry the reason
        return ExitInfo(code=code)

    def _require_started(self) -> tuple[EngineConfig, LogCapture]:
        if self._config is None or self._capture is None:
            raise RuntimeError("wait_ready() before start()")
        return self._config, self._capture


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pgid, sig)


def _wait_gone(pgid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False
