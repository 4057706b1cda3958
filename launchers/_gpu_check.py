"""Before the first launch: the target's GPUs exist and nothing outside the study holds them.

``nvidia-smi`` answers both: the GPUs this machine has (``--query-gpu``) and the processes
holding memory on each (``--query-compute-apps``). A holder is named with what frees it: a
container (found through the process's cgroup) with ``docker rm -f``, any other process with
``kill``; an engine a killed run of ours left is ``tune cleanup``'s to remove. Where
``nvidia-smi`` is not on this machine, the check says so once and the first launch meets the
devices as they are.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tuner.errors import InfraError, SpaceError

Smi = Callable[[list[str]], str]
_CONTAINER = re.compile(r"[0-9a-f]{64}")
GPU_QUERY = ["--query-gpu=index,uuid", "--format=csv,noheader"]
APPS_QUERY = ["--query-compute-apps=gpu_uuid,pid,process_name,used_memory", "--format=csv,noheader"]


def check_gpus(
    gpus: list[str], ours: frozenset[str] = frozenset(), smi: Smi | None = None
) -> list[str]:
    """Refuse a GPU that is not here or is held by a process outside ``ours`` (the ids of the
    containers of tune's own runs, which the run clears or waits for); return notes."""
    if not gpus:
        return []
    if smi is None:
        if shutil.which("nvidia-smi") is None:
            return ["GPUs not checked before the first launch: nvidia-smi is not on this machine"]
        smi = run_smi
    uuids = _gpus(smi(GPU_QUERY))
    wanted = {_resolve(g, uuids) for g in gpus}
    rows = [row for row in _rows(smi(APPS_QUERY)) if row[0] in wanted]
    held = [_holder(row, uuids) for row in rows if container_of(row[1]) not in ours]
    if held:
        raise InfraError(f"target.gpus: held outside this study: {'; '.join(held)}")
    return []


def run_smi(args: list[str]) -> str:
    return run_tool(["nvidia-smi", *args])


def run_tool(argv: list[str]) -> str:
    """A device tool's output, or an ``InfraError`` naming the tool and its last line."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise InfraError(f"{argv[0]} did not answer: {err}") from None
    if done.returncode != 0:
        last = (done.stdout.strip() or done.stderr.strip() or "no output").splitlines()[-1]
        raise InfraError(f"{argv[0]} exited with code {done.returncode}: {last}")
    return done.stdout


def _rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split(",")] for line in text.splitlines() if line]


def _gpus(text: str) -> dict[str, str]:
    """GPU index -> uuid."""
    return {row[0]: row[1] for row in _rows(text)}


def _resolve(gpu: str, uuids: dict[str, str]) -> str:
    if gpu in uuids:
        return uuids[gpu]
    if gpu in uuids.values():
        return gpu
    listed = ", ".join(uuids) or "none"
    raise SpaceError(f"target.gpus: GPU {gpu} is not on this machine (nvidia-smi lists {listed})")


def _holder(row: list[str], uuids: dict[str, str]) -> str:
    uuid, pid, name, memory = row[:4]
    index = next((i for i, u in uuids.items() if u == uuid), uuid)
    return holder_words(f"GPU {index}", memory, pid, name)


def holder_words(device: str, memory: str, pid: str, name: str) -> str:
    """``GPU 0: 80 GiB by pid 7 (python, process); free it with `kill 7`, ...``: a holder
    named with what frees it, its container where its cgroup names one."""
    container = container_of(pid)
    frees = f"docker rm -f {container[:12]}" if container else f"kill {pid}"
    what = f"container {container[:12]}" if container else "process"
    return (
        f"{device}: {memory} by pid {pid} ({name}, {what}); free it with `{frees}`, "
        "or `tune cleanup` if a run of tune left it"
    )


def container_of(pid: str, proc: Path = Path("/proc")) -> str | None:
    """The docker container id whose cgroup holds ``pid`` (None: not in a container)."""
    try:
        text = (proc / pid / "cgroup").read_text()
    except OSError:
        return None
    match = _CONTAINER.search(text)
    return match[0] if match else None
