"""How a run takes signals: SIGTERM as Ctrl-C, ``--timeout`` as an alarm that stops the
running trial the same way, and all three held back while a trial is claimed."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from tuner.stop_signals import guard, stopping


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a run like Ctrl-C does: engines stopped, trials marked, results kept."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise stopping(signum, KeyboardInterrupt(f"signal {signum}"))

    guard()  # Ctrl-C and SIGTERM dropped inside a finalizer are sent again
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals to the caller
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


TIME_UP = "timeout: the running trial was stopped and its config queued again for the next run"


class TimeUp(KeyboardInterrupt):
    """``--timeout`` passed during a trial. It unwinds as Ctrl-C does (engine stopped, trial
    marked and its config queued again), but the run ends as one whose time is up."""


def why_stopped(err: KeyboardInterrupt) -> str:
    """What an interrupted trial records as its failure."""
    return "stopped at --timeout" if isinstance(err, TimeUp) else "interrupted (Ctrl-C or SIGTERM)"


@contextmanager
def deadline_alarm(deadline: float | None) -> Iterator[None]:
    """``TimeUp`` raised in the main thread once ``deadline`` (``time.monotonic``) passes: a
    hung engine or a long tier must not hold a run past its ``--timeout``."""
    if deadline is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise stopping(signum, TimeUp("--timeout passed"))

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, max(0.001, deadline - time.monotonic()))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and the deadline's alarm held back (main thread only) and delivered on
    leaving."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGALRM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
