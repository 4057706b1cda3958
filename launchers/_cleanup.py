"""Nothing an unattended run started may outlive it.

Two nets under the launchers' own ``stop()``:

- In-process: ``stop_on_exit(launcher)`` makes SIGTERM unwind the main thread like Ctrl-C does
  (``SystemExit(143)``, so every ``with launcher:`` block and ``finally`` runs) and stops, at
  interpreter exit, any launcher still holding an engine.
- After a killed run (SIGKILL, power loss): every container we create carries the label
  ``tune.managed``, its owner (``host:pid``, ``tuner.owner``) and its study;
  ``clear_dead_runs`` removes those of a study whose run of this host is gone (before a run's
  first trial), ``remove_leftovers`` those whose owner is not alive here (``tune cleanup``).
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
import weakref
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from launchers._base import Launcher, Leftover
from tuner.errors import InfraError
from tuner.owner import gone, owner_alive
from tuner.stop_signals import guard, stopping

MANAGED = "tune.managed"
OWNER = "tune.owner"
STUDY = "tune.study"
TRIAL = "tune.trial"
DEVICES = "tune.devices"

_live: weakref.WeakSet[Launcher] = weakref.WeakSet()
_installed = False


def stop_on_exit(launcher: Launcher) -> None:
    """Track ``launcher`` until interpreter exit; turn SIGTERM into an unwinding exit."""
    global _installed
    _live.add(launcher)
    if _installed:
        return
    _installed = True
    atexit.register(_stop_all)
    guard()  # a stop dropped inside a finalizer is sent again, so the engine is still stopped
    # Only the main thread may set handlers; keep a handler someone else chose.
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _on_sigterm)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while a container is being created or removed.

    A second Ctrl-C during cleanup would otherwise orphan the container being removed; the
    signal is delivered once the block is done, so the run still stops.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if held:
            signal.raise_signal(held[0])


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise stopping(signum, SystemExit(128 + signum))


def _stop_all() -> None:
    for launcher in list(_live):
        # At exit, one failing stop must not keep the others running.
        with contextlib.suppress(Exception):
            launcher.stop()


def docker_client() -> Any:
    """A docker SDK client, or an ``InfraError`` when the daemon cannot be reached.

    Every caller looks it up here (``_cleanup.docker_client()``), so a test swaps one name."""
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except DockerException as err:
        raise InfraError(
            f"docker daemon unreachable ({_first_line(err)}); is dockerd running?"
        ) from None
    return client


def find_leftovers(client: Any, study: str | None = None, force: bool = False) -> list[Any]:
    """Containers we created whose run is gone (all of ours with ``force``)."""
    filters = [MANAGED] if study is None else [MANAGED, f"{STUDY}={study}"]
    found = client.containers.list(all=True, filters={"label": filters})
    return [c for c in found if force or not owner_alive(c.labels.get(OWNER, ""))]


def remove_leftovers(client: Any, study: str | None = None, force: bool = False) -> list[Leftover]:
    """Remove (kill first) every leftover container; returns what was removed."""
    from docker.errors import NotFound

    removed = []
    for container in find_leftovers(client, study, force):
        labels = container.labels
        try:
            container.remove(force=True)
        except NotFound:
            continue  # removed meanwhile (its own run's stop, or a parallel cleanup)
        removed.append(
            Leftover(
                container.name,
                container.status,
                labels.get(STUDY, ""),
                labels.get(TRIAL, ""),
                labels.get(OWNER, ""),
            )
        )
    return removed


def clear_dead_runs(study: str, report: Callable[[str], None]) -> None:
    """Remove the containers of ``study`` left by a run of this host that is gone; a daemon
    that cannot be reached, or a removal it refuses, is a warning (the first trial meets it)."""
    try:
        found = find_leftovers(docker_client(), study=study)
    except InfraError as err:
        report(f"warning: leftover containers not checked: {err}")
        return
    for container in found:
        # Only a dead run of this host: another host's run (tune in a container with its own
        # hostname, on a shared docker socket) cannot be seen from here and may be alive.
        if gone(owner := container.labels.get(OWNER, "")):
            _remove_dead(container, owner, report)


def _remove_dead(container: Any, owner: str, report: Callable[[str], None]) -> None:
    trial = container.labels.get(TRIAL, "-")
    try:
        container.remove(force=True)
    except Exception as err:  # removed meanwhile, or the daemon refused: the trial will say
        report(f"warning: container {container.name} of trial {trial} not removed: {err}")
        return
    report(f"removed container {container.name} of trial {trial}, left by the run {owner} "
           "that is gone")  # fmt: skip


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
