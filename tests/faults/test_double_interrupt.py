"""A second Ctrl-C while the process launcher waits out its stop grace still ends the engine
(fault 7: the grace was cut short before SIGKILL, with the process already let go of)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from launchers.process import ProcessLauncher, ProcessSettings
from tests.launchers.helpers import free_port
from tuner.engine import EngineConfig

# An engine that ignores SIGTERM, so stop() waits out its whole grace; its child too.
STUBBORN = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)'])\n"
    "print('up', flush=True)\n"
    "time.sleep(120)\n"
)


def _alive(pgid: int, within_s: float = 3.0) -> bool:
    """Whether the group still exists after ``within_s`` (a killed child's zombie lingers
    until init reaps it)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.slow  # raises SIGINT in the test process: alone, not in a test worker
def test_a_second_interrupt_during_the_grace_still_kills_the_engine(tmp_path: Path) -> None:
    launcher = ProcessLauncher(ProcessSettings.model_validate({"stop_grace_s": 30}))
    config = EngineConfig((sys.executable, "-c", STUBBORN), (), {}, "m", port=free_port())
    launcher.start(config, tmp_path)
    time.sleep(0.5)  # both processes are up
    pgid = launcher._proc.pid if launcher._proc else -1
    timer = threading.Timer(0.5, signal.raise_signal, (signal.SIGINT,))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        launcher.stop()  # the first Ctrl-C's shutdown, interrupted by a second one
    timer.join()
    assert time.monotonic() - started < 10  # the second Ctrl-C cut the 30 s grace short
    assert not _alive(pgid), "the engine's process group outlived the shutdown"
    launcher.stop()  # nothing left to stop
