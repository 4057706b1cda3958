"""Who owns a trial, an engine or a container: ``host:pid`` of the run that claimed or
started it, and whether that run still runs.

A worker names itself on each trial it claims, a trial notes the engines it started, and the
docker launcher labels its containers with it; after a killed run, each of them is judged by
this one rule. A pid is only seen on its own host, so another host's run is never called gone.
This module imports nothing of the project.
"""

from __future__ import annotations

import os
import socket


def owner_id() -> str:
    """``host:pid`` of this run, written on every trial, note and container it owns."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str) -> bool:
    """Whether the run ``owner`` names is still running (False for another host's run: its
    pid cannot be seen from here)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def gone(owner: str) -> bool:
    """Whether ``owner`` is a run of this host, not this one, that no longer runs."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    return not owner_alive(owner)
