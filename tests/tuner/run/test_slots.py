"""Laying out slots: device groups from --gpus/--npus, devices per engine, one port each."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.tuner.conftest import SMALL_SPACE
from tuner.errors import SlotError
from tuner.run.slots import (
    Slot,
    SlotRequest,
    devices_per_engine,
    idle_devices,
    parse_devices,
    plan_slots,
)
from tuner.space.schema import Space


def space(**changes: Any) -> Space:
    data = copy.deepcopy(SMALL_SPACE)
    for key, value in changes.items():
        data[key] = value
    return Space.model_validate(data)


def test_parse_devices_ranges_lists_and_uuids() -> None:
    assert parse_devices("0-3") == ["0", "1", "2", "3"]
    assert parse_devices("0,2,4-5") == ["0", "2", "4", "5"]
    assert parse_devices("GPU-a1,GPU-b2") == ["GPU-a1", "GPU-b2"]


@pytest.mark.parametrize(
    ("text", "message"),
    [("3-1", "runs backwards"), ("0,,1", "empty device id"), ("0-2,1", "listed twice")],
)
def test_parse_devices_refuses_bad_text(text: str, message: str) -> None:
    with pytest.raises(SlotError, match=message):
        parse_devices(text, "--npus")


def test_eight_gpus_with_tp4_give_two_disjoint_slots_with_own_ports() -> None:
    slots = plan_slots(space(), SlotRequest(gpus="0-7"))
    assert slots == [
        Slot(0, ("0", "1", "2", "3"), 8000),
        Slot(1, ("4", "5", "6", "7"), 8001),
    ]


def test_sixteen_npus_with_tp16_give_one_slot() -> None:
    s = space(base={"args": {"tensor-parallel-size": 16}})
    assert [sl.devices for sl in plan_slots(s, SlotRequest(npus="0-15"))] == [
        tuple(str(i) for i in range(16))
    ]


def test_devices_per_engine_prefers_flag_then_target_list_then_parallel_sizes() -> None:
    docker = space(target={"kind": "sim", "gpus": ["0", "1"]})
    assert devices_per_engine(docker, SlotRequest()) == 2
    assert devices_per_engine(docker, SlotRequest(devices_per_trial=1)) == 1
    tp_pp = space(base={"args": {"tensor-parallel-size": 2, "pipeline-parallel-size": 2}})
    assert devices_per_engine(tp_pp, SlotRequest()) == 4
    assert devices_per_engine(space(base={"args": {}}), SlotRequest()) == 1


def test_slots_cap_and_idle_devices() -> None:
    request = SlotRequest(gpus="0-6", devices_per_trial=2, slots=2)
    slots = plan_slots(space(), request)
    assert [s.devices for s in slots] == [("0", "1"), ("2", "3")]
    assert idle_devices(slots, request) == ["4", "5", "6"]


def test_slots_without_devices_differ_by_port_only() -> None:
    slots = plan_slots(space(), SlotRequest(slots=3))
    assert [(s.devices, s.port) for s in slots] == [((), 8000), ((), 8001), ((), 8002)]
    assert plan_slots(space(), SlotRequest()) == [Slot(0, (), 8000)]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (SlotRequest(gpus="0-2"), "cannot hold one engine of 4 devices"),
        (SlotRequest(gpus="0-7", slots=3), "holds only 2 engine"),
        (SlotRequest(gpus="0", npus="0"), "not both"),
        (SlotRequest(slots=0), "at least 1"),
        (SlotRequest(gpus="0-7", devices_per_trial=0), "at least 1"),
    ],
)
def test_impossible_layouts_are_one_line_errors(request_: SlotRequest, message: str) -> None:
    with pytest.raises(SlotError, match=message):
        plan_slots(space(), request_)


def test_pinned_slot_round_trips_through_its_flag_form() -> None:
    slot = Slot(1, ("4", "5"), 8001)
    assert Slot.from_arg(slot.to_arg()) == slot
    assert Slot.from_arg(Slot(0, (), 8000).to_arg()) == Slot(0, (), 8000)
    with pytest.raises(SlotError, match="INDEX/DEVICES/PORT"):
        Slot.from_arg("1:4,5:8001")
