"""Slots: how many trials one node runs at once, each on its own devices and port.

A node with more accelerators than one engine needs runs several engines side by side. From
the accelerators given (``--gpus 0-7`` or ``--npus 0-15``) and the devices one engine needs, the
node gets ``len(devices) // per_engine`` slots; slot ``i`` owns a disjoint device group and
listens on ``engine.port + i``. Without accelerators (the simulated engine, an endpoint),
``--slots N`` asks for N slots that differ only by port.

The devices one engine needs come from, in order: ``--devices-per-trial``; the target's own
device list (a docker target's ``gpus`` / ``npus``); the parallel sizes in the space's base
args (tensor x pipeline x data parallel); else 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

from tuner.errors import SlotError
from tuner.space.schema import Space

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_PARALLEL_ARGS = ("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size")


@dataclass(frozen=True)
class Slot:
    """One engine's place on a node: its index, its devices and its port."""

    index: int
    devices: tuple[str, ...]
    port: int

    def describe(self) -> str:
        devices = ",".join(self.devices) if self.devices else "no devices"
        return f"slot {self.index} ({devices}, port {self.port})"

    def to_arg(self) -> str:
        """The ``--pinned-slot`` form: ``INDEX/DEVICES/PORT`` (DEVICES comma-separated)."""
        return f"{self.index}/{','.join(self.devices)}/{self.port}"

    @classmethod
    def from_arg(cls, text: str) -> Slot:
        parts = text.split("/")
        if len(parts) != 3 or not parts[0].isdigit() or not parts[2].isdigit():
            raise SlotError(f"--pinned-slot: expected INDEX/DEVICES/PORT, got {text!r}")
        devices = tuple(d for d in parts[1].split(",") if d)
        return cls(int(parts[0]), devices, int(parts[2]))


@dataclass(frozen=True)
class SlotRequest:
    """The accelerator flags of ``tune run`` / ``tune worker``; empty means one slot."""

    gpus: str | None = None
    npus: str | None = None
    slots: int | None = None
    devices_per_trial: int | None = None

    @property
    def device_flag(self) -> str:
        return "--npus" if self.npus else "--gpus"


def parse_devices(text: str, flag: str = "--gpus") -> list[str]:
    """Device ids from ``0-7``, ``0,1,4-5`` or ``GPU-uuid,GPU-uuid``; order kept, no repeats."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        match = _RANGE.match(part)
        if match and match[2] is not None:
            lo, hi = int(match[1]), int(match[2])
            if hi < lo:
                raise SlotError(f"{flag}: range {part!r} runs backwards")
            out.extend(str(i) for i in range(lo, hi + 1))
        elif part:
            out.append(part)
        else:
            raise SlotError(f"{flag}: empty device id in {text!r}")
    repeated = sorted({d for d in out if out.count(d) > 1})
    if repeated:
        raise SlotError(f"{flag}: device {repeated[0]} is listed twice in {text!r}")
    return out


def devices_per_engine(space: Space, request: SlotRequest) -> int:
    """How many devices one engine of ``space`` needs (see the module docstring)."""
    if request.devices_per_trial is not None:
        if request.devices_per_trial < 1:
            raise SlotError(
                f"--devices-per-trial must be at least 1 (got {request.devices_per_trial})"
            )
        return request.devices_per_trial
    settings = space.target.settings()
    for key in ("gpus", "npus"):
        listed = settings.get(key)
        if isinstance(listed, list) and listed:
            return len(listed)
    sizes = [_int_arg(space, name) for name in _PARALLEL_ARGS]
    return prod(sizes)


def _int_arg(space: Space, name: str) -> int:
    value = space.base.args.get(name, space.base.args.get(f"--{name}", 1))
    try:
        return max(1, int(str(value)))
    except ValueError:
        return 1


def plan_slots(space: Space, request: SlotRequest) -> list[Slot]:
    """The slots of this node, in order; one slot without devices when nothing is asked."""
    if request.gpus and request.npus:
        raise SlotError("give --gpus or --npus, not both")
    if request.slots is not None and request.slots < 1:
        raise SlotError(f"--slots must be at least 1 (got {request.slots})")
    base_port = space.engine.port
    text = request.gpus or request.npus
    if not text:
        return [Slot(i, (), base_port + i) for i in range(request.slots or 1)]
    devices = parse_devices(text, request.device_flag)
    per = devices_per_engine(space, request)
    fits = len(devices) // per
    if fits == 0:
        raise SlotError(
            f"{request.device_flag} {text}: {len(devices)} device(s) cannot hold one engine of "
            f"{per} devices; pass more devices or --devices-per-trial"
        )
    count = request.slots or fits
    if count > fits:
        raise SlotError(
            f"--slots {count}: {request.device_flag} {text} holds only {fits} engine(s) of "
            f"{per} devices"
        )
    return [Slot(i, tuple(devices[i * per : (i + 1) * per]), base_port + i) for i in range(count)]


def idle_devices(slots: list[Slot], request: SlotRequest) -> list[str]:
    """Devices given but left unused because they do not fill one more engine."""
    text = request.gpus or request.npus
    if not text:
        return []
    used = {d for s in slots for d in s.devices}
    return [d for d in parse_devices(text, request.device_flag) if d not in used]
