"""One real ``vllm serve`` for ``bench.vllm_agreement``: started in its own process group,
asked for token counts and its own latency histograms, stopped with everything it started."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from itertools import pairwise
from pathlib import Path
from typing import Any

SERVED = "tiny"
# The server's own view of each run (engine-core timestamps, vllm/v1/metrics/stats.py): when
# both clients see the same gap, the server really ran differently under them.
SERVER_HISTOGRAMS = {
    "server_mean_ttft_ms": "vllm:time_to_first_token_seconds",
    "server_mean_tpot_ms": "vllm:request_time_per_output_token_seconds",
}


def http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 30) -> Any:
    """GET (no body) or POST JSON; the decoded answer. Raises on a non-2xx status."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"null")


def histogram_totals(text: str) -> dict[str, float]:
    """``_sum`` and ``_count`` of the server histograms in a ``/metrics`` text, over all labels."""
    wanted = {f"{h}_{part}" for h in SERVER_HISTOGRAMS.values() for part in ("sum", "count")}
    out = dict.fromkeys(wanted, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in wanted:
            out[name] += float(line.rsplit(" ", 1)[1])
    return out


def server_means(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Server-side mean TTFT and TPOT (ms) of the requests finished between two scrapes (a run's
    warm-up request included: one per run for either client)."""
    out = {}
    for key, hist in SERVER_HISTOGRAMS.items():
        n = after[f"{hist}_count"] - before[f"{hist}_count"]
        if n > 0:
            out[key] = (after[f"{hist}_sum"] - before[f"{hist}_sum"]) / n * 1000
    return out


def port_taken(port: int) -> bool:
    """Whether something already listens there (we would benchmark someone else's server)."""
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class VllmServer:
    """One ``vllm serve`` in its own process group, so stopping it takes its engine core too."""

    def __init__(self, args: argparse.Namespace, log: Path) -> None:
        self.url, self.log = f"http://127.0.0.1:{args.port}", log
        self.cmd = [str(args.venv / "bin" / "vllm"), "serve", str(args.model)]
        self.cmd += ["--served-model-name", SERVED, "--max-model-len", "2048"]
        self.cmd += ["--host", "127.0.0.1", "--port", str(args.port)]
        self.cmd += [] if args.compile else ["--enforce-eager"]
        self.cmd += [] if args.prefix_caching else ["--no-enable-prefix-caching"]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float) -> float:
        """Starts it and waits for /health 200 and one completion; seconds it took."""
        t0 = time.monotonic()
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                self.cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        self._wait_healthy(t0 + timeout_s)
        out = self.complete("hello", 2)
        if out["usage"]["completion_tokens"] != 2:
            raise RuntimeError(f"server ignored max_tokens: {out['usage']}")
        return time.monotonic() - t0

    def _wait_healthy(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited {self.proc.returncode}:\n{self.tail()}")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=5).close()
                return
            except (urllib.error.URLError, OSError):
                time.sleep(1)
        raise RuntimeError(f"vllm serve not healthy in time:\n{self.tail()}")

    def complete(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        body = {"model": SERVED, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True}
        return http_json(self.url + "/v1/completions", body, timeout=120)

    def count_tokens(self, text: str) -> int:
        """Prompt tokens as the server counts them (its ``/tokenize``, as for a completion)."""
        return int(http_json(self.url + "/tokenize", {"model": SERVED, "prompt": text})["count"])

    def scrape(self) -> dict[str, float]:
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as resp:
            return histogram_totals(resp.read().decode())

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the whole group, then SIGKILL to whatever of it is left (an engine core
        outliving the API process) after 20 s or at once."""
        if self.proc is None:
            return
        _signal_group(self.proc.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=20)
        _signal_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):  # the whole group may be gone already
        os.killpg(pgid, sig)


@contextmanager
def running(server: VllmServer, timeout_s: float) -> Iterator[float]:
    """The server up for the block, stopped however the block ends (Ctrl-C, SIGTERM too)."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield server.start(timeout_s)
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def other_servers(own_port: int) -> list[str]:
    """Ports of other ``vllm serve`` processes on this machine (the load both clients share)."""
    ports = set()
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(a.endswith("/vllm") and b == "serve" for a, b in pairwise(argv)):
            port = argv[argv.index("--port") + 1] if "--port" in argv[:-1] else "8000"
            ports.add(port)
    return sorted(ports - {str(own_port)})
