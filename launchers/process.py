"""``process``: the engine as a local command (argv, never a shell) in its own process group.

The command comes from ``EngineConfig.argv`` and runs with the tuner's environment plus
``EngineConfig.env``. Its stdout and stderr go, merged and redacted, to ``engine.log``. It is
started in a new session, so ``stop()`` reaches every process it spawned (vLLM's API server,
engine core and workers): SIGTERM to the group, SIGKILL after ``stop_grace_s``.

Compile and kernel caches need nothing here: the engine keeps them where it keeps them for
this user (vLLM's ``~/.cache/vllm`` or ``VLLM_CACHE_ROOT``, Triton's ``~/.triton``), and every
trial runs as the same user with the same environment, so a later launch of the same compile
key reads its graphs back.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from launchers import register
from launchers._base import LauncherSettings
from launchers._cleanup import shielded
from launchers._engine import HttpEngineLauncher, HttpEngineSettings, LogStream
from launchers._startup import ExitInfo
from tuner.engine import EngineConfig
from tuner.errors import TunerError


class ProcessSettings(HttpEngineSettings):
    """``target:`` settings of a local command."""

    cwd: Path | None = Field(None, description="Working directory of the command (default: ours).")
    stop_grace_s: float = Field(
        15.0, ge=0, description="Seconds between SIGTERM and SIGKILL to the process group on stop."
    )
    engine_cpus: list[int] = Field(
        default_factory=list,
        description="Cores the engine and every thread it starts run on (empty: any); keep "
        "the benchmark client's (workload.client_cpus) out of them.",
    )
    engine_nice: int = Field(
        0,
        ge=0,
        le=19,
        description="Niceness the engine starts with: above 0, the benchmark client on the "
        "same machine gets its core first when both want it.",
    )


def _group_nice(nice: int) -> None:
    """Give the engine's session the niceness too. The engine starts a session of its own, and
    where the kernel schedules sessions as groups (autogroup) a niceness weighs only against
    the group's own threads: the group as a whole competed with the benchmark client as an
    equal, and the client's event loop waited 100-280 ms behind the engine's core."""
    try:
        with open("/proc/self/autogroup", "w") as group:
            group.write(str(nice))
    except OSError:  # no autogroup in this kernel, or not allowed: the niceness alone
        pass


@register
class ProcessLauncher(HttpEngineLauncher):
    """A local engine command, owned from ``start`` until ``stop``."""

    kind: ClassVar[str] = "process"
    settings_model: ClassVar[type[LauncherSettings]] = ProcessSettings
    settings: ProcessSettings
    port_hint: ClassVar[str] = "; stop whatever listens there (or `tune cleanup`)"

    def __init__(self, settings: LauncherSettings) -> None:
        super().__init__(settings)
        self._proc: subprocess.Popen[bytes] | None = None

    def _holds_engine(self) -> bool:
        return self._proc is not None

    def _launch(self, config: EngineConfig) -> None:
        with shielded():  # a Ctrl-C inside Popen must not leave a child nobody tracks
            self._proc = self._spawn(config)

    def _placement(self) -> Callable[[], None] | None:
        """What the child does before it runs the engine: its cores, its priority (inherited
        by every thread and process the engine starts)."""
        cpus, nice = set(self.settings.engine_cpus), self.settings.engine_nice
        if not cpus and not nice:
            return None

        def place() -> None:  # in the child, between fork and exec: system calls only
            if cpus:
                os.sched_setaffinity(0, cpus)
            if nice:
                os.nice(nice)
                _group_nice(nice)

        return place

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
                preexec_fn=self._placement(),
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as err:
            assert self._capture is not None
            self._capture.finish()
            raise TunerError(f"cannot run engine command {config.argv[0]!r}: {err}") from None

    def _output(self) -> LogStream:
        assert self._proc is not None
        stdout = self._proc.stdout
        assert isinstance(stdout, io.BufferedReader)
        # read1: whatever is there now, so lines reach engine.log as they are printed.
        return lambda: iter(lambda: stdout.read1(65536), b"")

    def _exit_info(self) -> ExitInfo | None:
        if self._proc is None:
            return ExitInfo(code=-1)
        code = self._proc.poll()
        return None if code is None else ExitInfo(code=code)

    def _halt(self) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            _signal_group(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + self.settings.stop_grace_s
            proc.wait(timeout=self.settings.stop_grace_s)
            # Children may outlive the leader: wait for the group, then kill what is left.
            _wait_gone(proc.pid, deadline - time.monotonic())
        except subprocess.TimeoutExpired:
            pass
        finally:
            # Whatever cut the grace short (a second Ctrl-C, SIGTERM), the group is killed
            # and reaped before the engine is let go of; a signal during the reap leaves it
            # held, so the next stop() kills it again.
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
            self._proc = None


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
