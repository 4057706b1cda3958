"""``tune dashboard``: optuna-dashboard on a study's storage, on loopback only.

The dashboard can delete studies and edit trials, and a web page the user visits can reach a
loopback port (DNS rebinding: ``evil.example`` resolved to 127.0.0.1 sends ``Host:
evil.example``; a cross-site form posts from another ``Origin``). So the server answers only
requests addressed to its own names (``127.0.0.1:PORT``, ``localhost:PORT``), and only reads
unless started with ``allow_edits``; an edit must then come from its own pages' origin.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from optuna.storages import BaseStorage

from tuner.errors import TunerError
from tuner.storage.results import StudyPaths
from tuner.storage.studies import open_study
from tuner.storage.urls import open_storage

HOST = "127.0.0.1"  # the dashboard can edit studies: never expose it beyond this machine
READS = frozenset({"GET", "HEAD", "OPTIONS"})
App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def dashboard_url(storage: BaseStorage, name: str, port: int) -> str:
    study_id = storage.get_study_id_from_name(name)
    return f"http://{HOST}:{port}/dashboard/studies/{study_id}"


def own_hosts(port: int) -> frozenset[str]:
    """The ``Host`` values a request to this dashboard carries from a browser on this machine."""
    names = (HOST, "localhost")
    return frozenset(f"{n}:{port}" for n in names) | (frozenset(names) if port == 80 else set())


def guarded(app: App, port: int, allow_edits: bool) -> App:
    """``app`` answering only its own host names, and only reads unless ``allow_edits``."""
    hosts = own_hosts(port)

    def guard(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        why = _refusal(environ, hosts, allow_edits)
        if why is None:
            return app(environ, start)
        start("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8")])
        return [why.encode()]

    return guard


def _refusal(environ: dict[str, Any], hosts: frozenset[str], allow_edits: bool) -> str | None:
    host = environ.get("HTTP_HOST", "").lower()
    if host not in hosts:
        return f"this dashboard answers only {', '.join(sorted(hosts))}, not {host!r}\n"
    if environ.get("REQUEST_METHOD", "GET").upper() in READS:
        return None
    if not allow_edits:
        return "this dashboard is read-only: start it with --allow-edits to change studies\n"
    origin = environ.get("HTTP_ORIGIN")
    if origin is not None and origin.lower().removeprefix("http://") not in hosts:
        return f"an edit from another origin ({origin}) is refused\n"
    return None


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a line per request would bury the URL printed on start


def bind(app: App, port: int) -> WSGIServer:
    """The server on ``HOST:port``; a port in use is one line naming it."""
    try:
        return make_server(HOST, port, app, handler_class=_Quiet)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise TunerError(
                f"port {port} on {HOST} is in use; choose another with --port (0: any free one)"
            ) from None
        raise TunerError(f"cannot listen on {HOST}:{port}: {err.strerror}") from None


def serve_dashboard(
    name: str,
    storage: str | None,
    results_dir: Path,
    port: int,
    announce: Callable[[str], None] = print,
    allow_edits: bool = False,
) -> None:
    """Serve until interrupted; ``announce`` gets the study's URL once the port is bound."""
    import optuna_dashboard  # imported here: only this command needs it

    open_study(name, storage, results_dir)  # a missing study is a one-line error, not a page
    url = storage or StudyPaths.for_study(results_dir, name).default_storage_url
    backend = open_storage(url)  # any backend tune runs on: sqlite, journal, postgresql
    port = port or free_port()
    server = bind(guarded(optuna_dashboard.wsgi(backend), port, allow_edits), port)
    announce(dashboard_url(backend, name, port))
    with server:
        server.serve_forever()
