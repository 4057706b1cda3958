"""The launcher contract: how an engine is started, made ready, watched and stopped.

Every launcher kind (``sim``, ``process``, ``docker``, ``endpoint``) implements ``Launcher``:

- Ownership: from ``start()`` until ``stop()`` the launcher owns whatever it started (a
  container, a process group, an in-process simulated engine). Nobody else stops it. A launcher
  started nothing for ``endpoint`` targets and so stops nothing.
- ``start(config, trial_dir)`` begins the launch and returns without waiting for readiness; the
  engine's full log goes to ``trial_dir / "engine.log"``.
- ``wait_ready(timeout_s)`` blocks until the engine serves (health answers and one real
  completion succeeds) and returns its ``Endpoint``. It fails fast: an engine that exits
  during start-up raises at once, not at the timeout.
- ``stop()`` is idempotent and never raises for an engine already gone: it is called on every
  path (success, failure, timeout, Ctrl-C, SIGTERM), usually through the context manager.
- ``logs()`` returns what the engine printed so far (secrets redacted).
- ``startup(wall_s)`` says what the launch took to get ready (or to fail), given the wall
  seconds its caller measured from ``start()``: on the engine's clock (a simulated engine
  says what the hardware would take) and with the compile-cache entry its log names.

Raises:
    LaunchError: from ``start`` / ``wait_ready``; its ``kind`` says whether the config
        (refused, OOM, crash, ready timeout) or the infrastructure (daemon unreachable, device
        busy, port in use) is at fault.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

# Both types belong to measuring; re-exported so launchers keep naming them as before.
from launchers._compile_log import compile_cache
from objectives.endpoint import Endpoint, VirtualEngine  # noqa: F401
from tuner.engine import EngineConfig


@dataclass(frozen=True)
class Startup:
    """A launch's way to ready: seconds, and the compile-cache entry it used if it says."""

    seconds: float
    compile_key: str | None = None
    compile_cached: bool | None = None


class LauncherSettings(BaseModel):
    """Base of each kind's ``target:`` settings in a space file."""

    model_config = ConfigDict(extra="forbid")


class Launcher(ABC):
    """One engine launch at a time; see the module docstring for the contract."""

    kind: ClassVar[str]
    settings_model: ClassVar[type[LauncherSettings]]

    def __init__(self, settings: LauncherSettings) -> None:
        self.settings = settings

    @abstractmethod
    def start(self, config: EngineConfig, trial_dir: Path) -> None: ...

    @abstractmethod
    def wait_ready(self, timeout_s: float) -> Endpoint: ...

    @abstractmethod
    def logs(self) -> str: ...

    @abstractmethod
    def stop(self) -> None: ...

    def startup(self, wall_s: float) -> Startup:
        """The start-up as measured, with what the engine's log says of its compile cache."""
        return Startup(wall_s, *compile_cache(self.logs()))

    def __enter__(self) -> Launcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
