"""A stop signal is never lost.

A Python signal handler runs in the main thread at the next line of Python, wherever that is.
When that line belongs to an object's ``__del__`` (an event loop or socket being collected), a
weakref callback or a GC callback, the exception the handler raises is printed as "Exception
ignored in ..." and dropped: the run goes on as if no SIGTERM, Ctrl-C or ``--timeout`` came, and
an unattended study or a container outlives the request to stop.

``guard()`` installs an unraisable hook, and ``stopping(signum, exc)`` marks the exception a
stop handler raises. When the hook sees such an exception dropped, it sends the signal to the
main thread again a moment later, when it lands on an ordinary line and unwinds as it should. A
dropped ``KeyboardInterrupt`` nobody marked is Python's own Ctrl-C and is sent again as SIGINT.
This module imports nothing of the project.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

_SIGNUM = "_tune_stop_signal"
REDELIVER_AFTER_S = 0.02  # long enough to be out of the finalizer that swallowed it
_hooked = False
_lock = threading.Lock()


def stopping(signum: int, exc: BaseException) -> BaseException:
    """``exc`` (raised by the handler of ``signum``) marked so that a drop is undone."""
    setattr(exc, _SIGNUM, signum)
    guard()
    return exc


def dropped_signal(exc: BaseException | None) -> int | None:
    """The signal whose stop ``exc`` was, or None when it was no stop."""
    signum = getattr(exc, _SIGNUM, None)
    if isinstance(signum, int):
        return signum
    return signal.SIGINT if type(exc) is KeyboardInterrupt else None


def guard() -> None:
    """Have every dropped stop sent again (idempotent; other dropped exceptions print as before)."""
    global _hooked
    with _lock:
        if _hooked:
            return
        _hooked = True
        previous = sys.unraisablehook

        def hook(args: Any) -> None:
            signum = dropped_signal(args.exc_value)
            if signum is None:
                previous(args)
            else:
                _redeliver_later(signum)

        sys.unraisablehook = hook


def _redeliver_later(signum: int) -> None:
    # Sent from another thread: sent from the hook itself, the handler would run inside the
    # hook, where its exception would be dropped again.
    timer = threading.Timer(REDELIVER_AFTER_S, _redeliver, (signum,))
    timer.daemon = True
    timer.start()


def _redeliver(signum: int) -> None:
    handler = signal.getsignal(signum)
    # An alarm whose deadline block is gone asks nothing any more, and its default would kill.
    if handler is signal.SIG_IGN or (signum == signal.SIGALRM and not callable(handler)):
        return
    main = threading.main_thread()
    if main.is_alive() and main.ident is not None:
        signal.pthread_kill(main.ident, signum)
