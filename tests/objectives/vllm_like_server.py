"""A loopback server that checks prompts the way vLLM 0.32 does, for the vocabulary tests.

Run: ``python tests/objectives/vllm_like_server.py --port 0 --vocab 961 --root DIR`` prints
``PORT <n>`` and serves on 127.0.0.1 until killed (or ``--max-seconds``):

- ``GET /v1/models``: one entry ``{"id": NAME, "root": ROOT, "max_model_len": 2048}``, as vLLM
  lists the model it loaded (``root`` is the folder it was loaded from).
- ``POST /v1/completions`` (streaming): a prompt holding a token id >= ``--vocab`` is refused
  as vLLM refuses it: ``--errors stream`` (vLLM 0.32's way for a streamed request) answers
  HTTP 200 with one SSE event ``{"error": {"message": "Token id N is out of vocabulary", ...}}``
  and ``[DONE]``; ``--errors http`` answers HTTP 400 with that JSON as the body. Valid prompts
  get ``max_tokens`` token chunks and a usage chunk; a request that does not ask to stream
  gets the whole answer as one JSON body (as tune's probes ask).
- ``--reject MESSAGE`` answers every completion with HTTP 400 ``{"error": {"message": MESSAGE,
  "type": "BadRequestError", "param": null, "code": 400}}``; ``--reject-format old`` sends
  ``{"message": MESSAGE}`` (older vLLM), ``text`` sends MESSAGE as plain text.

``GET /seen`` reports the highest prompt token id received so far (``-1`` before any).
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def error_body(message: str, code: int = 400) -> dict[str, Any]:
    """vLLM's ``ErrorResponse`` JSON."""
    err = {"message": message, "type": "BadRequestError", "param": None, "code": code}
    return {"error": err}


class State:
    """The server's options and the highest prompt id it has seen."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.max_seen = -1
        self.lock = threading.Lock()

    def see(self, prompt: Any) -> int:
        ids = [t for t in prompt if isinstance(t, int)] if isinstance(prompt, list) else []
        top = max(ids, default=-1)
        with self.lock:
            self.max_seen = max(self.max_seen, top)
        return top


def handler(state: State) -> type[BaseHTTPRequestHandler]:
    args = state.args

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *a: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                entry = {"id": args.name, "object": "model", "root": args.root}
                entry["max_model_len"] = 2048
                if args.n_vocab:
                    entry["meta"] = {"n_vocab": args.n_vocab}
                self._json(200, {"object": "list", "data": [entry]})
            elif self.path == "/seen":
                self._json(200, {"max_seen": state.max_seen})
            elif self.path == "/health":
                self._json(200, {})
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if self.path != "/v1/completions":
                return self._json(404, error_body("not found", 404))
            if args.reject is not None:
                return self._reject(args.reject)
            top = state.see(body.get("prompt"))
            if top >= args.vocab:
                return self._refuse(f"Token id {top} is out of vocabulary")
            if not body.get("stream"):  # a whole answer, as vLLM sends one
                return self._json(
                    200, {"choices": [{"index": 0, "text": " x" * int(body.get("max_tokens", 1))}]}
                )
            self._stream(int(body.get("max_tokens", 1)))

        def _reject(self, message: str) -> None:
            if args.reject_format == "text":
                return self._send(400, message.encode(), "text/plain")
            payload = {"message": message} if args.reject_format == "old" else error_body(message)
            self._json(400, payload)

        def _refuse(self, message: str) -> None:
            if args.errors == "http":
                return self._json(400, error_body(message))
            self._sse([error_body(message)])

        def _stream(self, n: int) -> None:
            token = {"choices": [{"index": 0, "text": " x", "finish_reason": None}]}
            usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
            self._sse([token] * n + [{"choices": [], "usage": usage}])

        def _sse(self, events: list[dict[str, Any]]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for event in events:
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

        def _json(self, code: int, payload: dict[str, Any]) -> None:
            self._send(code, json.dumps(payload).encode(), "application/json")

        def _send(self, code: int, payload: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--name", default="tiny")
    ap.add_argument("--root", default="/nonexistent/model")
    ap.add_argument("--vocab", type=int, default=961)
    ap.add_argument("--n-vocab", type=int, default=0)
    ap.add_argument("--errors", choices=("stream", "http"), default="stream")
    ap.add_argument("--reject", default=None)
    ap.add_argument("--reject-format", choices=("new", "old", "text"), default="new")
    ap.add_argument("--max-seconds", type=float, default=120.0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(State(args)))
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    timer = threading.Timer(args.max_seconds, server.shutdown)
    timer.daemon = True
    timer.start()
    server.serve_forever()


if __name__ == "__main__":
    main()
