"""``tune dashboard`` answers only its own host names and only reads unless asked: a web page
reaching its loopback port (DNS rebinding, a cross-site form) changes nothing. A busy port is
one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import optuna
import pytest

from tests.faults.procs import REPO
from tests.tuner.export.conftest import hand_results, hand_study_dir  # noqa: F401 (fixtures)
from tuner.cli import main
from tuner.export.dashboard import HOST, free_port

EVIL = "evil.example"


def _dashboard(results: Path, port: int, *flags: str) -> Iterator[str]:
    cmd = [sys.executable, "-m", "tuner", "dashboard", "--study", "hand", "--port", str(port)]
    cmd += ["--results-dir", str(results), *flags]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # the URL, printed once the port is bound
        yield f"http://{HOST}:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def read_only(hand_results: Path) -> Iterator[str]:  # noqa: F811
    yield from _dashboard(hand_results, free_port())


@pytest.fixture
def editable(hand_results: Path) -> Iterator[str]:  # noqa: F811
    yield from _dashboard(hand_results, free_port(), "--allow-edits")


def _study_ids(results: Path) -> list[int]:
    storage = f"sqlite:///{results / 'hand' / 'study.db'}"
    return [s._study_id for s in optuna.get_all_study_summaries(storage)]


def _delete(url: str, **headers: str) -> httpx.Response:
    return httpx.delete(f"{url}/api/studies/1", headers=headers, timeout=10)


def test_a_foreign_host_name_is_refused(read_only: str, hand_results: Path) -> None:  # noqa: F811
    # Before: DELETE with Host: evil.example:PORT answered 204 and deleted the study.
    port = read_only.rsplit(":", 1)[1]
    page = httpx.get(f"{read_only}/api/studies", headers={"Host": f"{EVIL}:{port}"}, timeout=10)
    assert page.status_code == 403 and "answers only" in page.text
    assert _delete(read_only, Host=f"{EVIL}:{port}").status_code == 403
    assert _study_ids(hand_results) == [1]
    assert httpx.get(f"{read_only}/api/studies", timeout=10).status_code == 200
    local = httpx.get(f"{read_only}/api/studies", headers={"Host": f"localhost:{port}"})
    assert local.status_code == 200


def test_the_dashboard_is_read_only_unless_asked(read_only: str, hand_results: Path) -> None:  # noqa: F811
    refused = _delete(read_only)
    assert refused.status_code == 403 and "--allow-edits" in refused.text
    assert _study_ids(hand_results) == [1]


def test_an_edit_from_another_origin_is_refused(editable: str, hand_results: Path) -> None:  # noqa: F811
    assert _delete(editable, Origin=f"http://{EVIL}").status_code == 403
    assert _study_ids(hand_results) == [1]
    assert _delete(editable, Origin=editable).status_code == 204  # its own page may
    assert _study_ids(hand_results) == []


def test_a_busy_port_is_one_line(
    hand_results: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before: an OSError traceback.
    with socket.socket() as busy:
        busy.bind((HOST, 0))
        busy.listen()
        port = busy.getsockname()[1]
        argv = ["dashboard", "--study", "hand", "--port", str(port)]
        started = time.monotonic()
        assert main([*argv, "--results-dir", str(hand_results)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"error: port {port} on {HOST} is in use; choose another with --port (0: any free one)\n"
    )
    assert time.monotonic() - started < 10
