"""Imports the built-in launcher modules so they register their kinds."""

from __future__ import annotations

from launchers import docker, endpoint, process, sim  # noqa: F401
