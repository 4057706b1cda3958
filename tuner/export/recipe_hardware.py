"""Where a recipe runs, in the recipes' own words: a hardware id, a vendor, a strategy.

The recipes name hardware by a short id (``h200``, ``gb300``, ``mi355x``) and key a model's
``docker_image`` by vendor (``nvidia``, ``amd``). A space says its hardware in free text
("4x NVIDIA H200 141GB"), so the id is read from that text unless the space sets
``hardware_id`` itself; the vendor follows from the id, or from the engine when the id is not
one of the known ones (vllm-ascend runs on Ascend NPUs only).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tuner.export.configs import flags_dict
from tuner.space.schema import Space

# The one table of known ids: each id's vendor. Longer ids first, so "gb300" is not read as
# "b300" and "h200" not as "h20".
VENDORS = {
    **dict.fromkeys(("gb300", "gb200", "b300", "b200", "h200", "h100", "h20"), "nvidia"),
    **dict.fromkeys(("a100", "l40s"), "nvidia"),
    **dict.fromkeys(("mi355x", "mi325x", "mi300x"), "amd"),
    **dict.fromkeys(("910c", "910b"), "ascend"),
    "cpu": "cpu",
}
_ID = re.compile(r"\b(" + "|".join(VENDORS) + r")\b", re.IGNORECASE)
_ENGINE_VENDORS = {"vllm-ascend": "ascend"}


def hardware_id(space: Space) -> str | None:
    """The space's ``hardware_id``, else the first known id in its hardware text (None: none)."""
    if space.hardware_id:
        return space.hardware_id
    found = _ID.search(space.hardware)
    return found.group(1).lower() if found else None


def vendor(space: Space) -> str:
    """The vendor a recipe keys the image by: the hardware id's, else the engine's usual one."""
    known = VENDORS.get(hardware_id(space) or "")
    return known or _ENGINE_VENDORS.get(space.engine.name, "nvidia")


def strategy(shared_args: Sequence[str]) -> str:
    """The recipes' name for how one node splits the model, from the flags every point shares:
    expert parallel over tensor parallel is ``single_node_tep``, over data parallel
    ``single_node_dep``."""
    flags = flags_dict(shared_args)
    if "--enable-expert-parallel" not in flags:
        return "single_node_tp"
    dp = flags.get("--data-parallel-size", ("1",))
    return "single_node_dep" if dp and dp[0] != "1" else "single_node_tep"
