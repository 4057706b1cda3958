"""Accelerators of a docker launch: container options per kind, and who holds them now.

NVIDIA GPUs go through a device request (the NVIDIA container runtime maps them); Ascend NPUs
through their device nodes plus the driver's management nodes and read-only driver mounts.
Each container of ours records its devices in a label (``nvidia:0,1``), so the next launch
waits for a previous trial's container on the same devices to be gone; where ``nvidia-smi``
exists, a process of anyone else computing on those GPUs counts as holding them too.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from launchers._cleanup import DEVICES, MANAGED, STUDY, TRIAL

ASCEND_CONTROL_NODES = ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]


class DeviceSettings(Protocol):
    """What of a docker target's settings decides its device options (``DockerSettings``)."""

    @property
    def npus(self) -> Sequence[int]: ...
    @property
    def npu_visible_ids(self) -> Literal["logical", "physical"]: ...
    @property
    def ascend_driver_mounts(self) -> Sequence[str]: ...


def device_label(settings: DeviceSettings, devices: list[str]) -> str:
    """``nvidia:0,1`` / ``ascend:0,1`` / empty: what a container holds, as its label says."""
    if not devices:
        return ""
    return ("ascend:" if settings.npus else "nvidia:") + ",".join(devices)


def device_options(
    settings: DeviceSettings, devices: list[str]
) -> tuple[dict[str, str], dict[str, Any], dict[str, dict[str, str]]]:
    """(env, create() keyword arguments, driver bind mounts) for ``devices``."""
    if not devices:
        return {}, {}, {}
    if not settings.npus:
        from docker.types import DeviceRequest

        request = DeviceRequest(driver="nvidia", device_ids=devices, capabilities=[["gpu"]])
        return {}, {"device_requests": [request]}, {}
    nodes = [f"/dev/davinci{n}" for n in devices] + ASCEND_CONTROL_NODES
    visible = devices if settings.npu_visible_ids == "physical" else range(len(devices))
    env = {"ASCEND_RT_VISIBLE_DEVICES": ",".join(str(n) for n in visible)}
    binds = {path: {"bind": path, "mode": "ro"} for path in settings.ascend_driver_mounts}
    return env, {"devices": [f"{node}:{node}:rwm" for node in nodes]}, binds


def busy_holders(client: Any, label: str) -> list[str]:
    """Who holds any of the devices in ``label`` now: our containers, other GPU processes."""
    if not label:
        return []
    kind, _, ids = label.partition(":")
    wanted = set(ids.split(","))
    holders = []
    for container in client.containers.list(all=True, filters={"label": [MANAGED]}):
        held_kind, _, held = container.labels.get(DEVICES, "").partition(":")
        if container.status in ("exited", "dead") or held_kind != kind:
            continue
        if wanted & set(held.split(",")):
            study, trial = container.labels.get(STUDY, "?"), container.labels.get(TRIAL, "?")
            holders.append(f"container {container.name} (study {study}, trial {trial})")
    if kind == "nvidia":
        holders += _gpu_processes(wanted)
    return holders


def _gpu_processes(wanted: set[str]) -> list[str]:
    """Compute processes on the wanted GPUs (by index or UUID), where nvidia-smi exists."""
    if shutil.which("nvidia-smi") is None:
        return []
    gpus = _smi("--query-gpu=index,uuid")
    uuids = {uuid for index, uuid in gpus if index in wanted or uuid in wanted}
    return [
        f"pid {pid} ({name}) on GPU {uuid}"
        for uuid, pid, name in _smi("--query-compute-apps=gpu_uuid,pid,process_name")
        if uuid in uuids
    ]


def _smi(query: str) -> list[list[str]]:
    try:
        out = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []  # a broken nvidia-smi must not block launches; our labels still do
    return [[field.strip() for field in line.split(",")] for line in out.splitlines() if line]
