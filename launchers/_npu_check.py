"""Before the first launch: the target's Ascend NPUs exist and nothing outside the study holds them.

``npu-smi info`` answers both in its two tables: one row pair per NPU (its id, name and health
first), then one row per process holding NPU memory (NPU id, chip, pid, name, MB), or "No
running processes found in NPU N". A holder is named as ``_gpu_check`` names one: its container
(through the process's cgroup) with ``docker rm -f``, any other process with ``kill``. Where
``npu-smi`` is not on this machine, the check says so once and the first launch meets the NPUs
as they are.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable

from launchers._gpu_check import container_of, holder_words, run_tool
from tuner.errors import InfraError, SpaceError

Tool = Callable[[], str]  # npu-smi info's output
_NPU = re.compile(r"^\|\s*(\d+)\s+\S+\s*\|\s*(?:OK|Warning|Alarm|Critical)\b", re.IGNORECASE)
_HOLDER = re.compile(r"^\|\s*(\d+)\s+\d+\s*\|\s*(\d+)\s*\|\s*(\S+)\s*\|\s*(\d+)\s*\|")


def check_npus(
    npus: list[int], ours: frozenset[str] = frozenset(), info: Tool | None = None
) -> list[str]:
    """Refuse an NPU that is not here or is held by a process outside ``ours`` (the ids of the
    containers of tune's own runs); return notes on what could not be checked."""
    if not npus:
        return []
    if info is None:
        if shutil.which("npu-smi") is None:
            return ["NPUs not checked before the first launch: npu-smi is not on this machine"]
        info = run_npu_smi
    text = info()
    listed = [m[1] for line in text.splitlines() if (m := _NPU.match(line))]
    missing = [str(n) for n in npus if str(n) not in listed]
    if missing:
        raise SpaceError(
            f"target.npus: NPU {', '.join(missing)} is not on this machine "
            f"(npu-smi lists {', '.join(listed) or 'none'})"
        )
    holders = [_holder(m) for line in text.splitlines() if (m := _HOLDER.match(line))]
    held = [why for npu, pid, why in holders if int(npu) in npus and container_of(pid) not in ours]
    if held:
        raise InfraError(f"target.npus: held outside this study: {'; '.join(held)}")
    return []


def run_npu_smi() -> str:
    return run_tool(["npu-smi", "info"])


def _holder(match: re.Match[str]) -> tuple[str, str, str]:
    npu, pid, name, mb = match.groups()
    return npu, pid, holder_words(f"NPU {npu}", f"{mb} MB", pid, name)
