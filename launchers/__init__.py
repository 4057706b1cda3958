"""Launcher plugins, chosen by the space's ``target.kind`` through a plain dict."""

from __future__ import annotations

from launchers._base import Endpoint, Launcher, LauncherSettings, Startup, VirtualEngine
from tuner.errors import SpaceError

LAUNCHERS: dict[str, type[Launcher]] = {}


def register(cls: type[Launcher]) -> type[Launcher]:
    """Class decorator that makes a launcher kind selectable by name."""
    LAUNCHERS[cls.kind] = cls
    return cls


def launcher_class(kind: str) -> type[Launcher]:
    """The launcher class for ``kind``; an unknown kind names the valid ones."""
    _load_builtin()
    try:
        return LAUNCHERS[kind]
    except KeyError:
        valid = ", ".join(sorted(LAUNCHERS))
        raise SpaceError(f"unknown launcher kind {kind!r}; valid kinds: {valid}") from None


def _load_builtin() -> None:
    # Imported lazily: the docker SDK and the simulator are not needed to parse a space.
    from launchers import builtin  # noqa: F401


__all__ = [
    "LAUNCHERS",
    "Endpoint",
    "Launcher",
    "LauncherSettings",
    "Startup",
    "VirtualEngine",
    "launcher_class",
    "register",
]
