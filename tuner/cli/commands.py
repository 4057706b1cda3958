"""Imports every command module so that each registers itself on ``app``."""

from __future__ import annotations

from tuner.cli import (  # noqa: F401
    bench,
    capacity,
    cleanup,
    dashboard,
    export,
    run,
    show,
    sim_serve,
    worker,
)
