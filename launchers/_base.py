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

What the core asks of a kind without launching (class methods, each a no-op by default):

- ``clear_leftovers(study, report)``: before a run's first trial, remove what a run of the
  study on this host that is gone left of this kind (the docker kind: its containers); never
  raises, a fault here is the first trial's to meet;
- ``remove_leftovers(study, force)``: ``tune cleanup``, asked by a person: remove what every
  run that is not alive here left (with ``force``, alive ones' too) and say what was removed;
- ``deploy_command(settings, deployment)``: the command a person runs to serve a config the
  way this kind starts it (the docker kind: ``docker run``), as word groups, one per line;
- ``check_devices(settings)``: before the first launch, the target's devices exist and no
  process outside tune's runs holds them (the docker kind asks ``nvidia-smi`` / ``npu-smi``);
  raises with what holds them and the command that frees it, returns notes on what it could
  not check;
- ``engine_facts(settings, prefix)``: what the vLLM program ``prefix`` names says of itself
  where this kind runs it (the docker kind: inside the image, without devices), for the
  pre-flight; None where this kind has no program of its own to ask. Raises
  ``FactsUnavailable`` where the program cannot answer (``fatal``: nor could it start).

Raises:
    LaunchError: from ``start`` / ``wait_ready``; its ``kind`` says whether the config
        (refused, OOM, crash, ready timeout) or the infrastructure (daemon unreachable, device
        busy, port in use) is at fault.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

# Both types belong to measuring; re-exported so launchers keep naming them as before.
from launchers._compile_log import compile_cache
from launchers._vllm_facts import EngineFacts
from objectives.endpoint import Endpoint, VirtualEngine  # noqa: F401
from tuner.engine import EngineConfig

Report = Callable[[str], None]
Group = tuple[str, ...]  # the words of one line of a shown command


@dataclass(frozen=True)
class Leftover:
    """What ``remove_leftovers`` removed: a container (its name and state) and its labels."""

    name: str
    status: str
    study: str
    trial: str
    owner: str


@dataclass(frozen=True)
class Deployment:
    """A config as a person deploys it: the engine program and its env (its flags follow the
    command ``deploy_command`` returns)."""

    argv: tuple[str, ...]
    env: dict[str, str]
    secret_env: tuple[str, ...] = ()  # names the deploying shell passes through, never values
    all_gpus: bool = False  # with no device list, ask for every GPU (an image for a GPU node)


@dataclass(frozen=True)
class DeployCommand:
    """``deploy_command``'s answer: the command's word groups, and the target's settings that
    the command cannot say (shown beside it)."""

    groups: list[Group]
    unrendered: dict[str, Any] = field(default_factory=dict)


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

    @classmethod
    def clear_leftovers(cls, study: str, report: Report) -> None:
        """Remove what a gone run of ``study`` on this host left of this kind (see above)."""
        return None  # a kind that starts nothing outliving its run's notes leaves nothing

    @classmethod
    def remove_leftovers(cls, study: str | None, force: bool = False) -> list[Leftover]:
        """``tune cleanup``: remove what runs no longer alive left (see above)."""
        return []

    @classmethod
    def deploy_command(
        cls, settings: LauncherSettings, deployment: Deployment
    ) -> DeployCommand | None:
        """The command that serves ``deployment`` as this kind would (None: it has none)."""
        return None

    @classmethod
    def check_devices(cls, settings: LauncherSettings) -> list[str]:
        """Refuse devices that are missing or held before the first launch (see above)."""
        return []  # a kind that names no devices has none to check

    @classmethod
    def engine_facts(cls, settings: LauncherSettings, prefix: list[str]) -> EngineFacts | None:
        """The engine program's own facts where this kind runs it (see above)."""
        return None

    def __enter__(self) -> Launcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
