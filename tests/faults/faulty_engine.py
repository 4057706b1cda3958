"""An engine stand-in that serves well, then fails on cue the way a real engine can.

Started as a local engine command (``python faulty_engine.py MODEL --port N [flags]``) or by
``serve()`` in a thread. It answers ``/health``, ``/v1/models`` and ``/v1/completions``
(streaming a token every ``--x-itl-ms``); the ``--x-mode`` flag says what goes wrong once
``--x-after`` streamed requests have begun:

- ``ok``: nothing;
- ``hang``: every stream stops mid-way and stays open, ``/health`` still answers 200;
- ``frozen``: the same, and ``/health`` stops answering too (a wedged host or network);
- ``crash``: the process exits at once, as an engine killed by an out-of-memory error;
- ``fail``: every completion is answered 500 at once, no token ever.

``--x-ignore-sigterm 1`` makes it ignore SIGTERM, as an engine busy in a kernel or a stuck
shutdown does: whoever stops it must wait out a grace and then kill it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FAULTY_ENGINE = Path(__file__)  # the script, for an engine command


class Engine:
    def __init__(self, model: str, mode: str, after: int, itl_s: float) -> None:
        self.model, self.mode, self.after, self.itl_s = model, mode, after, itl_s
        self.started = 0
        self.lock = threading.Lock()
        self.wedged = threading.Event()

    def begin(self) -> bool:
        """Count one streamed request; True once the fault is on."""
        with self.lock:
            self.started += 1
            broken = self.mode != "ok" and self.started > self.after
        if broken and self.mode in ("hang", "frozen"):
            self.wedged.set()
        if broken and self.mode == "crash":
            os._exit(137)
        return broken


def handler(engine: Engine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms stall

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/health":
                if engine.mode == "frozen" and engine.wedged.is_set():
                    time.sleep(3600)
                self._send(200, b"")
            elif self.path == "/v1/models":
                card = {"id": engine.model, "object": "model", "meta": {"n_vocab": 777}}
                self._send(200, json.dumps({"object": "list", "data": [card]}).encode())
            else:
                self._send(404, b'{"error": "not found"}')

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if not body.get("stream"):  # the ready probe
                choice = {"index": 0, "text": "x", "finish_reason": "length"}
                return self._send(200, json.dumps({"choices": [choice]}).encode())
            if engine.begin() and engine.mode == "fail":
                return self._send(500, b'{"error": {"message": "engine core dead"}}')
            self._stream(int(body.get("max_tokens", 1)))

        def _stream(self, n: int) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(n):
                if engine.wedged.is_set() and i > 0:
                    time.sleep(3600)  # mid-stream: the connection stays open, silent
                chunk = {"choices": [{"index": 0, "text": "x", "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(engine.itl_s)
            usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
            self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

        def _send(self, code: int, payload: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops connects at c16, each then waits 1 s


def serve(engine: Engine, port: int = 0) -> Server:
    """``engine`` on 127.0.0.1:``port`` (0: any free port) in a daemon thread."""
    server = Server(("127.0.0.1", port), handler(engine))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--x-mode", default="ok")
    parser.add_argument("--x-after", type=int, default=0)
    parser.add_argument("--x-itl-ms", type=float, default=2.0)
    parser.add_argument("--x-ignore-sigterm", type=int, default=0)
    args, _ = parser.parse_known_args(argv)
    if args.x_ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    engine = Engine(args.model, args.x_mode, args.x_after, args.x_itl_ms / 1000)
    server = Server((args.host, args.port), handler(engine))
    with contextlib.suppress(BrokenPipeError):  # the run reading our log is gone: serve on
        print(f"listening on http://{args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
