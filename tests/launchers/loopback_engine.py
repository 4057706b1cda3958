"""A real loopback HTTP server that behaves like ``vllm serve`` where launchers look.

Launcher tests start it as an engine command: it parses vLLM-style flags, logs vLLM-like
start-up lines (``non-default args: {...}``, ``Unknown vLLM environment variable detected``),
serves ``/health``, ``/v1/models`` and ``/v1/completions`` (streaming or not) on 127.0.0.1,
and on request fails the way vLLM does at start-up. Flags starting ``--x-`` steer the behaviour:

--x-startup-s S      seconds before the port opens (model loading)
--x-refuse LINE      print LINE (e.g. "ValueError: ...") and exit 1 during start-up
--x-oom              print a CUDA out-of-memory traceback line and exit 1
--x-hang             never open the port
--x-report KEY=VAL   report VAL for engine arg KEY (an engine that overrode a flag)
--x-unknown-env NAME warn that env NAME is unknown when it is set
--x-echo-env NAME    print env NAME's value (a secret the launcher must redact)
--x-alloc-mb N       allocate N MiB during start-up (meets a container memory limit)
--x-child            spawn a child process that lives as long as the group
--x-ignore-sigterm   keep running on SIGTERM (stop must escalate to SIGKILL)
--x-itl-ms MS        pause MS between streamed tokens, as an engine's decode step does

``--api-key KEY`` is vLLM's own flag: every ``/v1`` path then answers 401 unless the request
carries ``Authorization: Bearer KEY`` (``/health`` stays open, as in vLLM).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse(argv: list[str]) -> tuple[argparse.Namespace, dict[str, object]]:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--x-startup-s", type=float, default=0.0)
    parser.add_argument("--x-refuse", default=None)
    parser.add_argument("--x-oom", action="store_true")
    parser.add_argument("--x-hang", action="store_true")
    parser.add_argument("--x-report", action="append", default=[])
    parser.add_argument("--x-unknown-env", action="append", default=[])
    parser.add_argument("--x-echo-env", action="append", default=[])
    parser.add_argument("--x-alloc-mb", type=int, default=0)
    parser.add_argument("--x-child", action="store_true")
    parser.add_argument("--x-ignore-sigterm", action="store_true")
    parser.add_argument("--x-itl-ms", type=float, default=0.0)
    args, rest = parser.parse_known_args(argv)
    return args, engine_args(rest)


def engine_args(rest: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    i = 0
    while i < len(rest):
        name = rest[i].lstrip("-").replace("-", "_")
        if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            try:
                out[name] = json.loads(rest[i + 1])
            except ValueError:
                out[name] = rest[i + 1]
            i += 2
        else:
            out[name.removeprefix("no_")] = not name.startswith("no_")
            i += 1
    return out


def log(line: str) -> None:
    print(f"(APIServer pid={os.getpid()}) INFO {line}", flush=True)


def start_up(args: argparse.Namespace, extra: dict[str, object]) -> None:
    for item in args.x_report:
        key, _, value = item.partition("=")
        try:
            extra[key] = json.loads(value)
        except ValueError:
            extra[key] = value
    log(f"non-default args: { ({'model': args.model, 'port': args.port, **extra})!r}")
    for name in args.x_unknown_env:
        if name in os.environ:
            print(f"WARNING [envs.py:1744] Unknown vLLM environment variable detected: {name}")
    for name in args.x_echo_env:
        log(f"{name} is {os.environ.get(name, '')}")
    if args.x_child:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    time.sleep(args.x_startup_s)
    ballast = bytearray(args.x_alloc_mb << 20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page: really resident
    if args.x_refuse:
        print("Traceback (most recent call last):", flush=True)
        print(args.x_refuse, flush=True)
        sys.exit(1)
    if args.x_oom:
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
        sys.exit(1)
    while args.x_hang:
        time.sleep(1)


def handler(
    model: str, api_key: str | None = None, itl_ms: float = 0.0
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            log(format % args)

        def _refused(self) -> bool:
            # vLLM's --api-key: every /v1 route wants the bearer token, health does not.
            wanted = f"Bearer {api_key}"
            if api_key is None or not self.path.startswith("/v1"):
                return False
            if self.headers.get("Authorization") == wanted:
                return False
            self._send(401, b'{"error": "Unauthorized"}')
            return True

        def do_GET(self) -> None:
            if self._refused():
                return
            if self.path == "/health":
                self._send(200, b"")
            elif self.path == "/v1/models":
                card = {"id": model, "object": "model", "meta": {"n_vocab": 777}}
                self._send(200, json.dumps({"object": "list", "data": [card]}).encode())
            else:
                self._send(404, b'{"error": "not found"}')

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if self._refused():
                return
            if self.path != "/v1/completions":
                return self._send(404, b'{"error": "not found"}')
            if body.get("model") != model:
                error = {"error": f"model {body.get('model')!r} does not exist"}
                return self._send(404, json.dumps(error).encode())
            n = int(body.get("max_tokens", 1))
            if body.get("stream"):
                return self._stream(n)
            choice = {"index": 0, "text": "x" * n, "finish_reason": "length"}
            usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
            self._send(200, json.dumps({"choices": [choice], "usage": usage}).encode())

        def _stream(self, n: int) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for _ in range(n):
                time.sleep(itl_ms / 1000)
                chunk = {"choices": [{"index": 0, "text": "x", "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
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


def main() -> None:
    args, extra = parse(sys.argv[1:])
    if args.x_ignore_sigterm:
        signal.signal(signal.SIGTERM, lambda *_: log("SIGTERM ignored"))
    start_up(args, extra)
    served = args.served_model_name or args.model
    serving = handler(served, args.api_key, args.x_itl_ms)
    server = ThreadingHTTPServer((args.host, args.port), serving)
    log(f"Started server process; listening on http://{args.host}:{args.port}")
    server.serve_forever()


if __name__ == "__main__":
    main()
