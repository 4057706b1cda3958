"""Imports every command module so that each registers itself on ``app``."""

from __future__ import annotations

from tuner.cli import bench, cleanup, run, show  # noqa: F401
from tuner.cli import sim_serve  # noqa: F401
