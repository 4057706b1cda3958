"""Real servers on loopback for the client, load and CLI tests."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def paced_server(itl_ms: float = 10, ttft_ms: float = 20) -> Iterator[str]:
    """bench/pacing_server.py in its own process; yields its base URL."""
    script = ROOT / "bench" / "pacing_server.py"
    args = ["--itl-ms", str(itl_ms), "--ttft-ms", str(ttft_ms), "--max-seconds", "120"]
    with _serve(script, args) as url:
        yield url


@contextmanager
def vllm_like_server(*args: str) -> Iterator[str]:
    """tests/objectives/vllm_like_server.py (vLLM's prompt checks) with ``args``; its URL."""
    with _serve(Path(__file__).with_name("vllm_like_server.py"), list(args)) as url:
        yield url


@contextmanager
def keyed_server(api_key: str, model: str = "m") -> Iterator[str]:
    """tests/launchers/loopback_engine.py started with ``--api-key``: every /v1 path answers
    401 without ``Authorization: Bearer <api_key>``; yields its base URL. Tokens come 5 ms
    apart: a server that streams as fast as the socket takes them leaves the client, not the
    server, the limit of every tier, which the benchmark rightly refuses to count."""
    script = ROOT / "tests" / "launchers" / "loopback_engine.py"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    argv = [sys.executable, str(script), model, "--port", str(port), "--api-key", api_key]
    argv += ["--x-itl-ms", "5"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=10)


def tiny_model(folder: Path) -> Path:
    """A model folder like domain.md 7b's: 958 ordinary ids, 3 specials, config vocab 961."""
    folder.mkdir(parents=True)
    vocab = {f"t{i}": i for i in range(958)}
    added = [{"id": i, "content": f"<|s{i}|>", "special": True} for i in (958, 959, 960)]
    tok = {"added_tokens": added, "model": {"type": "BPE", "vocab": vocab, "merges": []}}
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    (folder / "config.json").write_text(json.dumps({"vocab_size": 961}))
    return folder


@contextmanager
def _serve(script: Path, args: list[str]) -> Iterator[str]:
    # Each server prints "PORT <n>" once it listens on 127.0.0.1.
    proc = subprocess.Popen(
        [sys.executable, str(script), "--port", "0", *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
