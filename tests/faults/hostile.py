"""A server on loopback that answers like an OpenAI-compatible engine, except where it is told
to misbehave the way the fault audit's servers did.

- ``content_length``: streamed completions are answered with this ``Content-Length`` header
  (``-5``, ``abc``) and a short body;
- ``drip``: paths (``/metrics``, ``/health``) whose answer is sent one chunk a second, for ever;
- ``nested``: every streamed completion sends one event of JSON nested this deep first;
- ``echo_key``: every streamed completion is refused 400, its message repeating the key sent;
- ``endless``: every stream sends tokens for ever, never ``[DONE]``;
- ``metrics``: ``(status, body)`` that ``/metrics`` answers instead of vLLM's counters.

Everything else is an engine that serves well: ``/health`` 200, ``/v1/models``, ``/metrics``
(vLLM's counter names), the ready probe's completion, and streams of ``max_tokens`` tokens.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Hostile:
    content_length: str | None = None
    drip: tuple[str, ...] = ()
    nested: int = 0
    echo_key: bool = False
    endless: bool = False
    metrics: tuple[int, bytes] | None = None
    model: str = "m"
    stop: threading.Event = field(default_factory=threading.Event)


METRICS = b"vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"


def handler(h: Hostile) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path in h.drip:
                return self._drip()
            if self.path == "/health":
                self._send(200, b"")
            elif self.path == "/metrics":
                self._send(*(h.metrics or (200, METRICS)), "text/plain")
            elif self.path == "/v1/models":
                card = {"id": h.model, "object": "model", "meta": {"n_vocab": 777}}
                self._send(200, json.dumps({"object": "list", "data": [card]}).encode())
            else:
                self._send(404, b'{"error": "not found"}')

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if not body.get("stream"):  # the ready probe
                choice = {"index": 0, "text": "x", "finish_reason": "length"}
                return self._send(200, json.dumps({"choices": [choice]}).encode())
            if h.echo_key:
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                message = {"error": {"message": f"bad request from key {key}", "code": 400}}
                return self._send(400, json.dumps(message).encode())
            if h.content_length is not None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", h.content_length)
                self.end_headers()
                self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True
                return None
            return self._stream(int(body.get("max_tokens", 1)))

        def _stream(self, n: int) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            if h.nested:
                deep = "[" * h.nested + "]" * h.nested
                self.wfile.write(f'data: {{"choices": [], "x": {deep}}}\n\n'.encode())
            while h.endless and not h.stop.is_set():
                chunk = {"choices": [{"index": 0, "text": "x", "finish_reason": None}]}
                try:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                except OSError:
                    return
                time.sleep(0.01)
            for _ in range(n):
                chunk = {"choices": [{"index": 0, "text": "x", "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(0.001)
            usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
            self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

        def _drip(self) -> None:
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while not h.stop.is_set():  # never a whole answer: one byte a second
                try:
                    self.wfile.write(b"1\r\n#\r\n")
                    self.wfile.flush()
                except OSError:
                    return
                h.stop.wait(1.0)
            self.close_connection = True

        def _send(self, code: int, payload: bytes, kind: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64


@contextmanager
def serving(h: Hostile) -> Iterator[str]:
    """``h`` on 127.0.0.1 (a free port) in a daemon thread; yields its base URL."""
    server = _Server(("127.0.0.1", 0), handler(h))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        h.stop.set()
        server.shutdown()
        server.server_close()
