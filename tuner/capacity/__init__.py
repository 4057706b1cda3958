"""``tune capacity``: how many users one replica serves within the study's SLOs.

``study.run_capacity`` launches each recommended config and the defaults once, and on each
running engine searches the largest load the SLOs hold at (``search``: bracketing, then
bisection; ``probe``: one measurement at one load). The answer is plain data
(``tuner.storage.capacity``), kept in the study's ``capacity.json`` for the exports.
"""

from __future__ import annotations

from tuner.capacity.study import CapacityOptions, run_capacity

__all__ = ["CapacityOptions", "run_capacity"]
