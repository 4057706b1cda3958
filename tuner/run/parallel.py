"""Several slots on one node: one ``tune worker`` process per slot, pinned to its devices.

Why processes and not threads: Python delivers Ctrl-C and SIGTERM to a process's main thread
only, so a thread could not stop its engine mid-launch; each slot's benchmark client (asyncio,
stream parsing, metrics) gets a core instead of sharing one interpreter lock, which would make
the client, not the engine, the bottleneck at high concurrency; and a crash stays in its slot.
A slot is exactly a worker pinned to a device group, so one node and many nodes share one code
path and one budget rule.

The children run in their own process groups: a Ctrl-C in the terminal reaches the parent
only, which sends each child one SIGTERM; each child stops its engine, marks its trial
interrupted and queues its config again, then exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from tuner.errors import StudyError
from tuner.run.context import RunOptions, StudyContext
from tuner.run.join import WorkerOptions, WorkerSummary, join_study, run_options
from tuner.run.loop import Joined, study_tally
from tuner.run.objective import Report
from tuner.run.signals import sigterm_as_interrupt
from tuner.run.slots import Slot
from tuner.storage.urls import backend_of, redact, shared_by_processes


def run_study_in_slots(
    ctx: StudyContext, opts: RunOptions, slots: list[Slot], report: Report
) -> tuple[Joined, WorkerSummary]:
    """``tune run`` on several slots: create the study here, then one worker per slot."""
    wopts = run_options(ctx, opts)
    with sigterm_as_interrupt():
        joined = join_study(wopts, report, ctx)  # its warm start's picks are queued here
        return joined, run_slots(wopts, joined, slots, report)


def run_slots(
    opts: WorkerOptions, joined: Joined, slots: list[Slot], report: Report
) -> WorkerSummary:
    """Run one child worker per slot until all exit; Ctrl-C / SIGTERM stop them all."""
    if not shared_by_processes(opts.storage):
        raise StudyError(
            f"--storage {redact(opts.storage)}: several slots run as processes and need a "
            "storage they can share (sqlite:///FILE, journal:FILE or postgresql://...)"
        )
    report(
        f"study {opts.study!r}: {len(slots)} slots ({', '.join(s.describe() for s in slots)}), "
        f"budget {joined.budget} trials, storage {redact(opts.storage)}"
    )
    if backend_of(opts.storage) == "sqlite":
        report(
            "note: the slots share a SQLite file; for long or many-slot studies prefer "
            "--storage journal:FILE (this machine) or postgresql://... (several machines)"
        )
    children = [_Child(_command(opts, slot), slot, report) for slot in slots]
    interrupted = False
    try:
        for child in children:
            child.wait()
    except KeyboardInterrupt:
        interrupted = True
        report("interrupted: stopping the engine of every slot (their trials are queued again)")
        for child in children:
            child.terminate()
        for child in children:
            child.wait()
    for child in children:
        if child.proc.returncode not in (0, 130):
            report(f"{child.slot.describe()}: worker exited with code {child.proc.returncode}")
    interrupted = interrupted or any(c.proc.returncode == 130 for c in children)
    tally = study_tally(joined.study, joined.budget)  # the children ran; the parent counts
    return WorkerSummary(opts.study, 0, tally.complete, tally.budget, interrupted)


def _command(opts: WorkerOptions, slot: Slot) -> list[str]:
    s = opts.settings
    cmd = [sys.executable, "-m", "tuner", "worker", "--study", opts.study]
    cmd += ["--storage", opts.storage, "--results-dir", str(opts.results_dir)]
    cmd += ["--pinned-slot", slot.to_arg(), "--poll", str(opts.poll_s)]
    cmd += [
        "--heartbeat",
        str(s.heartbeat_s),
        "--grace",
        str(s.grace_s),
        "--outage",
        str(s.outage_s),
    ]
    if opts.timeout_s is not None:
        cmd += ["--timeout", f"{opts.timeout_s:g}s"]
    return cmd


class _Child:
    """One slot's worker process, its output forwarded line by line with a slot prefix."""

    def __init__(self, cmd: list[str], slot: Slot, report: Report) -> None:
        self.slot = slot
        root = str(Path(__file__).resolve().parent.parent)
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"},
            process_group=0,  # Ctrl-C in the terminal reaches the parent only
        )
        self._pump = threading.Thread(target=self._forward, args=(report,), daemon=True)
        self._pump.start()

    def _forward(self, report: Report) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            report(f"[slot {self.slot.index}] {line.rstrip()}")

    def wait(self) -> int:
        code = self.proc.wait()
        self._pump.join(timeout=5)
        return code

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
