"""``tune dashboard``: optuna-dashboard on a study's storage, on loopback only."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from optuna.storages import BaseStorage

from tuner.storage.results import StudyPaths
from tuner.storage.studies import open_study
from tuner.storage.urls import open_storage

HOST = "127.0.0.1"  # the dashboard can edit studies: never expose it beyond this machine


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def dashboard_url(storage: BaseStorage, name: str, port: int) -> str:
    study_id = storage.get_study_id_from_name(name)
    return f"http://{HOST}:{port}/dashboard/studies/{study_id}"


def serve_dashboard(
    name: str,
    storage: str | None,
    results_dir: Path,
    port: int,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve until interrupted; ``announce`` gets the study's URL before the server starts."""
    import optuna_dashboard  # imported here: only this command needs it

    open_study(name, storage, results_dir)  # a missing study is a one-line error, not a page
    url = storage or StudyPaths.for_study(results_dir, name).default_storage_url
    backend = open_storage(url)  # any backend tune runs on: sqlite, journal, postgresql
    port = port or free_port()
    announce(dashboard_url(backend, name, port))
    optuna_dashboard.run_server(backend, host=HOST, port=port)
