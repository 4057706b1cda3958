"""A stop signal whose exception Python drops inside a finalizer still stops the process.

Each case runs a child that sends itself the signal from an object's ``__del__``, so the
handler's exception is raised there and dropped ("Exception ignored in ..."); the child then
idles for 20 s and says so if nothing stopped it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    from launchers._cleanup import stop_on_exit
    from tuner.run.signals import TimeUp, deadline_alarm, sigterm_as_interrupt

    mode, signum = sys.argv[1], int(sys.argv[2])

    class Engine:
        def stop(self):
            print("ENGINE STOPPED", flush=True)

    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), signum)
            for _ in range(100000):  # the handler runs on one of these lines, in the finalizer
                pass

    def idle():
        Finalized()  # collected at once: the signal lands in its __del__
        time.sleep(20)
        print("NOT STOPPED", flush=True)

    engine = Engine()
    if mode == "launcher":
        stop_on_exit(engine)
        idle()
    else:
        context = sigterm_as_interrupt() if mode == "run" else deadline_alarm(time.monotonic() + 60)
        try:
            with context:
                idle()
        except TimeUp:
            print("TIME UP", flush=True)
        except KeyboardInterrupt:
            print("INTERRUPTED", flush=True)
    """
)


@pytest.mark.parametrize(
    ("mode", "signum", "code", "said"),
    [
        ("launcher", 15, 143, "ENGINE STOPPED"),  # SIGTERM unwinds as SystemExit(143)
        ("launcher", 2, -2, "ENGINE STOPPED"),  # Python's own Ctrl-C: killed by SIGINT
        ("run", 15, 0, "INTERRUPTED"),  # a study's SIGTERM, as Ctrl-C
        ("timeout", 14, 0, "TIME UP"),  # --timeout's alarm
    ],
)
def test_a_stop_dropped_in_a_finalizer_still_stops(
    mode: str, signum: int, code: int, said: str
) -> None:
    cmd = [sys.executable, "-c", CHILD, mode, str(signum)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "NOT STOPPED" not in done.stdout, done.stderr
    assert said in done.stdout and done.returncode == code, (done.stdout, done.stderr)
    assert "Exception ignored" not in done.stderr  # the dropped stop is resent, not printed
