"""The launchers as the core sees them: the contract, and the kinds chosen by ``target.kind``.

Outside ``launchers/`` only this module is imported (``lint-imports`` keeps it so):

- ``launcher_class(kind)``: the kind a space's target names, through a plain dict that
  ``register`` fills; ``Launcher`` (``_base``) is the contract every kind keeps, with what the
  core asks of a kind without launching: leftovers to clear, a deployable command;
- for the pre-flight check of a space against the installed engine: ``requested_flags`` (the
  flags a launch's arguments request), ``plugin_env`` (an env variable a platform plugin reads
  that core vLLM would call unknown), ``engine_facts`` (what an installed vLLM says of
  itself: version, flags and their choices, env; a kind's ``Launcher.engine_facts`` asks the
  program where that kind runs it, the docker kind inside its image) and ``FactsUnavailable``;
- for a space's static checks, where no program is asked: ``FLAG_RELEASES`` (which vLLM
  release first parses a flag; the simulated engine reads it too), ``Version`` and
  ``parse_version``.
"""

from __future__ import annotations

from pathlib import Path

from launchers._base import (
    DeployCommand,
    Deployment,
    Endpoint,
    Launcher,
    LauncherSettings,
    Leftover,
    Startup,
    VirtualEngine,
)
from launchers._knobs import plugin_env, requested_flags
from launchers._vllm_facts import (
    FLAG_RELEASES,
    EngineFacts,
    FactsUnavailable,
    Version,
    parse_version,
    read_facts,
)
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


def engine_facts(program: Path) -> EngineFacts:
    """What the ``vllm`` executable ``program`` says of itself (cached per program version)."""
    return read_facts(program)


def _load_builtin() -> None:
    # Imported lazily: the docker SDK and the simulator are not needed to parse a space.
    from launchers import builtin  # noqa: F401


__all__ = [
    "FLAG_RELEASES",
    "LAUNCHERS",
    "DeployCommand",
    "Deployment",
    "Endpoint",
    "EngineFacts",
    "FactsUnavailable",
    "Launcher",
    "LauncherSettings",
    "Leftover",
    "Startup",
    "Version",
    "VirtualEngine",
    "engine_facts",
    "launcher_class",
    "parse_version",
    "plugin_env",
    "register",
    "requested_flags",
]
