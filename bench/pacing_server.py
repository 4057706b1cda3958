"""A fast OpenAI-compatible streaming server with a known, fixed token pacing.

Run: ``python -m bench.pacing_server --port 0 --itl-ms 25 --ttft-ms 50`` prints ``PORT <n>``
and serves on 127.0.0.1 until killed (or ``--max-seconds``). Raw asyncio sockets, HTTP/1.1
keep-alive, chunked SSE: each stream emits its tokens at ``first + k * itl`` on its own timer
(absolute times, no drift), and every write is stamped so ``GET /stats`` reports the pacing the
server really achieved (per-stream gaps between writes): the truth a client's ITL is judged by.

The model name picks a behaviour, so a client's failure handling can be tested for real:
``paced`` (default), ``http-500``, ``broken`` (connection cut after 2 tokens), ``malformed``
(a non-JSON event), ``short`` (half the asked tokens: length not honoured), ``slow`` (first
token after 30 s), ``no-usage``, ``usage-on-last`` (usage on the last chunk with choices, as
llama.cpp does), ``no-done`` (stream ends without ``[DONE]``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from time import perf_counter

import numpy as np


class Pacer:
    """Shared state: pacing, counters for /metrics, per-stream write times for /stats."""

    def __init__(self, itl_s: float, ttft_s: float) -> None:
        self.itl_s, self.ttft_s = itl_s, ttft_s
        self.gaps: list[np.ndarray] = []
        self.request_gaps: list[float] = []  # mean gap of each request: what TPOT measures
        self.events = 0
        self.first_write = 0.0
        self.last_write = 0.0
        self.counters = {"prompt_tokens": 0, "generation_tokens": 0, "requests": 0}
        self.running = 0
        self.running_peak = 0

    def stats(self) -> dict[str, float]:
        gaps = np.concatenate(self.gaps) * 1000 if self.gaps else np.zeros(1)
        per_req = np.asarray(self.request_gaps or [0.0]) * 1000
        span = self.last_write - self.first_write
        return {
            "tpot_ms_p50": float(np.percentile(per_req, 50)),
            "tpot_ms_p99": float(np.percentile(per_req, 99)),
            "first_write": self.first_write,
            "last_write": self.last_write,
            "events": self.events,
            "event_rate": self.events / span if span > 0 else 0.0,
            "itl_ms_nominal": self.itl_s * 1000,
            "itl_ms_mean": float(gaps.mean()),
            "itl_ms_p50": float(np.percentile(gaps, 50)),
            "itl_ms_p90": float(np.percentile(gaps, 90)),
            "itl_ms_p99": float(np.percentile(gaps, 99)),
        }

    def metrics(self) -> str:
        c = self.counters
        return (
            "# TYPE vllm:prompt_tokens_total counter\n"
            f"vllm:prompt_tokens_total {c['prompt_tokens']}\n"
            "# TYPE vllm:generation_tokens_total counter\n"
            f"vllm:generation_tokens_total {c['generation_tokens']}\n"
            "# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total 0\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running {self.running}\n"
        )


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(obj: object) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


_DONE = _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


class Stream:
    """One streamed response, driven by loop timers at absolute times."""

    def __init__(self, pacer: Pacer, writer: asyncio.StreamWriter, body: dict, chat: bool) -> None:
        self.p, self.w = pacer, writer
        self.model = str(body.get("model", "paced"))
        self.n = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        if self.model == "short":
            self.n = max(1, self.n // 2)
        self.usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.k = 0
        self.times = np.zeros(self.n)
        choice = (
            {"index": 0, "delta": {"content": " tok"}} if chat else {"index": 0, "text": " tok"}
        )
        self.token = _event({"object": "chunk", "model": self.model, "choices": [choice]})
        last = {**choice, "finish_reason": "length"}
        self.last = {"object": "chunk", "model": self.model, "choices": [last]}
        self.done = asyncio.get_running_loop().create_future()

    def start(self) -> None:
        self.p.running += 1
        self.p.running_peak = max(self.p.running_peak, self.p.running)
        self.w.write(_HEAD)
        ttft = 30.0 if self.model == "slow" else self.p.ttft_s
        self.t0 = perf_counter() + ttft
        asyncio.get_running_loop().call_at(self._loop_time(self.t0), self._emit)

    def _loop_time(self, t: float) -> float:
        loop = asyncio.get_running_loop()
        return loop.time() + (t - perf_counter())

    def _emit(self) -> None:
        if self.w.is_closing():
            return self._finish()
        now = perf_counter()
        self.times[self.k] = now
        self.k += 1
        if self.model == "broken" and self.k == 3:
            self.w.transport.abort()
            return self._finish()
        if self.model == "malformed" and self.k == 2:
            self.w.write(_chunk(b"data: {oops\n\n"))
        elif self.k < self.n:
            self.w.write(self.token)
        else:
            self._write_last()
            return self._finish()
        self.p.events += 1
        asyncio.get_running_loop().call_at(
            self._loop_time(self.t0 + self.k * self.p.itl_s), self._emit
        )

    def _write_last(self) -> None:
        usage = {"prompt_tokens": 1, "completion_tokens": self.n, "total_tokens": self.n + 1}
        if self.model == "usage-on-last":
            self.w.write(_event({**self.last, "usage": usage}))
        else:
            self.w.write(_event(self.last))
            if self.usage and self.model != "no-usage":
                self.w.write(_event({"object": "chunk", "choices": [], "usage": usage}))
        self.p.events += 1
        self.w.write(b"0\r\n\r\n" if self.model == "no-done" else _DONE)

    def _finish(self) -> None:
        self.p.running -= 1
        if self.k > 1:
            self.p.gaps.append(np.diff(self.times[: self.k]))
            self.p.request_gaps.append((self.times[self.k - 1] - self.times[0]) / (self.k - 1))
        if self.k:
            self.p.first_write = self.p.first_write or float(self.times[0])
            self.p.last_write = max(self.p.last_write, float(self.times[self.k - 1]))
        self.p.counters["generation_tokens"] += self.k
        if not self.done.done():
            self.done.set_result(None)


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return method, path, body


def _plain(status: str, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (
        status.encode(),
        ctype,
        len(body),
        body,
    )


async def _serve_one(
    pacer: Pacer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> bool:
    req = await _read_request(reader)
    if req is None:
        return False
    method, path, body = req
    if path.startswith("/v1/") and path.endswith("completions") and method == "POST":
        data = json.loads(body)
        pacer.counters["requests"] += 1
        pacer.counters["prompt_tokens"] += len(data.get("prompt") or data.get("messages") or [])
        if data.get("model") == "http-500":
            writer.write(_plain("500 Internal Server Error", b'{"error":"boom"}'))
            return True
        stream = Stream(pacer, writer, data, chat=path.endswith("chat/completions"))
        stream.start()
        await stream.done
        return stream.model not in ("broken", "no-done")
    routes = {
        "/health": lambda: _plain("200 OK", b""),
        "/metrics": lambda: _plain("200 OK", pacer.metrics().encode(), b"text/plain"),
        "/stats": lambda: _plain("200 OK", json.dumps(pacer.stats()).encode()),
        "/count": lambda: _plain("200 OK", json.dumps({"events": pacer.events}).encode()),
        "/v1/models": lambda: _plain("200 OK", b'{"object":"list","data":[{"id":"paced"}]}'),
    }
    writer.write(routes.get(path, lambda: _plain("404 Not Found", b"{}"))())
    return True


async def _connection(
    pacer: Pacer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while await _serve_one(pacer, reader, writer):
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def serve(port: int, itl_s: float, ttft_s: float, max_seconds: float) -> None:
    pacer = Pacer(itl_s, ttft_s)
    server = await asyncio.start_server(
        lambda r, w: _connection(pacer, r, w), "127.0.0.1", port, backlog=4096
    )
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await asyncio.sleep(max_seconds)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--itl-ms", type=float, default=25.0)
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--max-seconds", type=float, default=600.0)
    args = ap.parse_args(argv)
    try:
        asyncio.run(serve(args.port, args.itl_ms / 1000, args.ttft_ms / 1000, args.max_seconds))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
