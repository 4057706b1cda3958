"""The benchmark client on cores of its own, and what to say when something took them.

On a machine the engine shares, the client's event loop must be on time to time chunks; a
core the engine leaves to it (``workload.client_cpus``, with the engine bound away or started
with a lower priority by its launcher) keeps it so. ``pinned`` binds the calling thread, and
so every thread and worker process it starts, for the length of a benchmark.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from objectives.result import TierResult
from tuner.errors import TunerError

# A client that had this share of a core or more was busy itself, not kept off its core.
BUSY_SHARE = 0.8
# A host of its own counts no steal; a virtual machine whose hypervisor took this share of
# its CPU time over a tier woke the client late in bursts (2-7% read 4-6 ms at P99 on a VM
# that was otherwise idle, the same with both of its cores busy).
STEAL_SHARE = 0.01


@contextmanager
def pinned(cpus: Sequence[int]) -> Iterator[None]:
    """Run the body on ``cpus`` (nothing changes when empty), then on the cores it had."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, set(cpus))
    except OSError as err:
        raise TunerError(f"workload.client_cpus {list(cpus)}: cannot run there ({err})") from None
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def client_limit_reason(results: Sequence[TierResult], cpus: Sequence[int]) -> str | None:
    """Why the client, not the engine, limited a tier, and what to set (None: it did not)."""
    bad = [r for r in results if r.client_saturated]
    if not bad:
        return None
    worst = max(bad, key=lambda r: r.client.get("p99_loop_lag_ms", 0.0))
    lag, share = worst.client.get("p99_loop_lag_ms", 0.0), worst.client.get("cpu_share", 0.0)
    tiers = ",".join(f"c{r.concurrency}" for r in bad)
    head = (
        f"the benchmark client, not the engine, limited a tier ({tiers}: its event loop "
        f"{lag:.0f} ms late at P99 with {share:.0%} of a core)"
    )
    if share >= BUSY_SHARE:
        return f"{head}: the client itself was busy; send from more client processes"
    if faults := int(worst.client.get("major_faults", 0)):
        return (
            f"{head}: it waited on {faults} page faults read from disk (the kernel had taken "
            "its memory back); give the machine memory to spare while a study runs"
        )
    if (steal := worst.client.get("steal_share", 0.0)) >= STEAL_SHARE:
        return (
            f"{head}: the machine's hypervisor gave {steal:.0%} of its CPU time to other "
            "machines (steal), which wakes the client late whatever runs here; run it on a "
            "host with cores of its own, or accept timestamps this coarse: "
            f"workload.client_lag_limit_ms above {lag:.0f}"
        )
    core = f"core {cpus[0]}" if cpus else "a core"
    return (
        f"{head}: another process (the engine, on this machine) took its core; keep {core} "
        "for it: workload.client_cpus, and target.engine_cpus (cores away from it) or "
        "target.engine_nice (a lower priority) for the engine"
    )
