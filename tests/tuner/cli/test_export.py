"""`tune export` and `tune dashboard` as a user calls them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.tuner.export.conftest import hand_results, hand_study_dir  # noqa: F401 (fixtures)
from tuner.cli import main
from tuner.export.dashboard import free_port

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
    cmd = [sys.executable, "-m", "tuner", "dashboard", "--study", "hand"]
    cmd += ["--results-dir", str(results), "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
