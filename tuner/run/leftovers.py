"""Before the first trial, whatever a killed run of the study left running is stopped.

A run killed with SIGKILL cannot stop its engine: a container keeps its devices and port, a
local engine process its port, and every later trial would fail on them. So each run, before
its first trial, removes what a dead run of the same study left:

- what the launcher kind leaves itself (``Launcher.clear_leftovers``: the docker kind's
  containers, by their labels ``tune.study`` and ``tune.owner`` naming a run of this host that
  is gone; ``tune cleanup`` also removes those of other hosts' runs, asked by a person);
- engine processes: a trial notes the engines its launcher started (the process groups of
  this process's children that lead their own session, which is how local engines are
  started) in ``.engines.json`` in its folder, and removes the note once its engine is
  stopped. A note whose run is gone (``tuner.owner``) names engines to stop; a process is
  stopped only while its start time is still the noted one, so a reused pid is never hit.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NamedTuple

from launchers import launcher_class
from tuner.owner import gone, owner_id

Report = Callable[[str], None]
NOTE = ".engines.json"
STOP_GRACE_S = 15.0  # SIGTERM to SIGKILL, as the process launcher's default stop grace
_PROC = Path("/proc")


def clear_leftovers(study: str, target_kind: str, trials_dir: Path, report: Report) -> None:
    """Stop the engines and containers of the dead runs of ``study`` (see the docstring)."""
    launcher_class(target_kind).clear_leftovers(study, report)
    for note in sorted(trials_dir.glob(f"*/{NOTE}")):
        _stop_noted(note, report)


@contextmanager
def noted_engines(trial_dir: Path) -> Iterator[EngineNote]:
    """A note of the engines started during the block, removed when the block ends."""
    note = EngineNote(trial_dir / NOTE)
    try:
        yield note
    finally:
        note.path.unlink(missing_ok=True)


class EngineNote:
    """``take()`` after a launcher's ``start``: its engines, written down for a rerun."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def take(self) -> None:
        groups = [{"pgid": pid, "start": start} for pid, start in _session_children()]
        if groups:
            self.path.write_text(json.dumps({"owner": owner_id(), "groups": groups}))


class Proc(NamedTuple):
    """What ``/proc/PID/stat`` says of a process that matters here."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    start: int  # clock ticks after boot: with the pid, it names one process for ever

    @property
    def running(self) -> bool:
        return self.state not in ("Z", "X")  # a zombie is dead, only not reaped yet


def _procs() -> list[Proc]:
    found = []
    for entry in _PROC.glob("[0-9]*"):
        proc = _stat(int(entry.name))
        if proc is not None:
            found.append(proc)
    return found


def _stat(pid: int) -> Proc | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None  # gone
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return Proc(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def _session_children() -> list[tuple[int, int]]:
    """(pid, start time) of this process's children that lead their own session."""
    me = os.getpid()
    return [(p.pid, p.start) for p in _procs() if p.ppid == me and p.session == p.pid]


def _stop_noted(note: Path, report: Report) -> None:
    try:
        data: dict[str, Any] = json.loads(note.read_text())
    except (OSError, ValueError):
        return
    if not gone(str(data.get("owner", ""))):
        return  # a live run's engine, or another host's
    for group in data.get("groups", []):
        pgid, leader = int(group["pgid"]), _stat(int(group["pgid"]))
        if leader is not None and leader.running and leader.start == int(group["start"]):
            _stop_group(pgid)
            report(f"stopped engine process group {pgid}, left by the run {data['owner']}")
    note.unlink(missing_ok=True)


def _stop_group(pgid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.1)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    return any(p.pgrp == pgid and p.running for p in _procs())
