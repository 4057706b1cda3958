"""``tune bench`` stopped by SIGTERM keeps its completed tiers, as it does on Ctrl-C.

SIGTERM (a job scheduler's stop, ``timeout``, ``docker stop``) used to end the process at once,
and the tiers measured so far were never written to ``--json``.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.faulty_engine import Engine, serve
from tests.faults.procs import finish, tune
from tuner.cli import main


@pytest.fixture
def slow_server() -> Iterator[str]:
    """Tier c1 takes about a second, tier c2 several."""
    server = serve(Engine("m", "ok", after=0, itl_s=0.02))
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.mark.parametrize(
    "sig",
    [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)],  # SIGINT: a guard
)
def test_a_stopped_bench_writes_the_tiers_it_completed(
    slow_server: str, tmp_path: Path, sig: signal.Signals
) -> None:
    out = tmp_path / "bench.json"
    proc = tune(
        "bench", "--url", slow_server, "--model", "m", "--concurrency", "1,2",
        "--num-prompts", "4", "--warmup", "0", "--random-input-len", "8",
        "--random-output-len", "12", "--vocab-size", "700", "--json", str(out), "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "tier 1:" not in proc.stdout.readline():
        pass
    proc.send_signal(sig)
    code, rest = finish(proc)
    assert code == 130, rest
    assert "Traceback" not in rest
    tiers = json.loads(out.read_text())["tiers"]
    assert [t["max_concurrency"] for t in tiers] == [1]


def test_a_hung_server_ends_the_bench_keeping_the_tiers_done(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(Engine("m", "hang", after=1 + 4 + 1, itl_s=0.002))  # hangs in tier c2
    out = tmp_path / "bench.json"
    try:
        code = main([
            "bench", "--url", f"http://127.0.0.1:{server.server_address[1]}", "--model", "m",
            "--concurrency", "1,2", "--num-prompts", "4", "--random-input-len", "8",
            "--random-output-len", "12", "--vocab-size", "700", "--stall-floor", "1",
            "--json", str(out), "--no-progress",
        ])  # fmt: skip
    finally:
        server.shutdown()
    assert code == 1
    assert "the server hung" in capsys.readouterr().err
    assert [t["max_concurrency"] for t in json.loads(out.read_text())["tiers"]] == [1]
