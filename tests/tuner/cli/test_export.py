"""`tune export` and `tune dashboard` as a user calls them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import optuna
import pytest
import yaml

from tests.tuner.export.conftest import hand_results, hand_study_dir  # noqa: F401 (fixtures)
from tuner.cli import main
from tuner.export.dashboard import free_port
from tuner.storage.urls import open_storage

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def results(hand_results: Path) -> Path:  # noqa: F811
    return hand_results


def test_export_writes_every_file_and_lists_it(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--study", "hand", "--results-dir", str(results)]) == 0
    printed = capsys.readouterr().out
    for name in ("recipe.yaml", "commands.md", "trials.csv", "report.html", "pareto_c4.csv"):
        assert (results / "hand" / name).exists()
        assert name in printed and "bytes" in printed


def test_export_with_storage_url_and_out_dir(results: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{results / 'hand' / 'study.db'}"
    out = tmp_path / "out"
    argv = ["export", "--study", "hand", "--storage", url, "--out", str(out)]
    assert main([*argv, "--results-dir", str(tmp_path / "nowhere")]) == 0
    assert (out / "recipe.yaml").exists() and (out / "report.html").exists()


def test_unknown_study_is_one_line(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--study", "nope", "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no study 'nope'") and err.count("\n") == 1


def test_dashboard_serves_the_study_on_loopback(results: Path) -> None:
    port = free_port()
    proc = _dashboard("--results-dir", str(results), "--port", str(port))
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith(f"http://127.0.0.1:{port}/dashboard/studies/")
        page = _get_when_up(url, proc)
        assert page.status_code == 200 and "<html" in page.text.lower()
        api = httpx.get(f"http://127.0.0.1:{port}/api/studies", timeout=10)
        assert api.status_code == 200 and "hand" in api.text
        with pytest.raises(httpx.ConnectError):  # bound to 127.0.0.1 alone, not 0.0.0.0
            httpx.get(f"http://127.0.0.2:{port}/dashboard", timeout=5)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _dashboard(*args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "tuner", "dashboard", "--study", "hand", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )


def _get_when_up(url: str, proc: subprocess.Popen[str]) -> httpx.Response:
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(url, timeout=5)
        except httpx.ConnectError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_dashboard_refuses_an_unknown_study(results: Path) -> None:
    argv = ["dashboard", "--study", "nope", "--results-dir", str(results), "--port", "0"]
    assert main(argv) == 2


def test_export_and_dashboard_read_a_journal_storage(results: Path, tmp_path: Path) -> None:
    url = f"journal:{tmp_path / 'study.log'}"
    sqlite = f"sqlite:///{results / 'hand' / 'study.db'}"
    optuna.copy_study(from_study_name="hand", from_storage=sqlite, to_storage=open_storage(url))
    out = tmp_path / "out"
    assert main(["export", "--study", "hand", "--storage", url, "--out", str(out)]) == 0
    assert "c4" in yaml.safe_load((out / "recipe.yaml").read_text())["presets"]["hand"]["points"]
    port = free_port()
    proc = _dashboard("--storage", url, "--port", str(port))
    try:
        assert proc.stdout is not None
        page = _get_when_up(proc.stdout.readline().strip(), proc)
        assert page.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)
