"""An OpenAI-compatible HTTP server in front of the simulated engine (``vllm serve`` stand-in).

``main(argv)`` takes ``vllm serve`` flags plus ``--sim-profile``, ``--sim-seed``,
``--sim-version`` (the vLLM release it announces and whose flags it parses; default the
profile's) and ``--sim-startup-delay`` (seconds before the port opens, as a real engine loads),
reads env vars as vLLM does, and exits non-zero with vLLM's log line where vLLM refuses to
start (2 for argument errors). Endpoints: ``/v1/completions`` and ``/v1/chat/completions``
(streamed as SSE, one chunk per engine step's tokens, ``usage`` when asked), ``/v1/models``,
``/health`` (503 once the engine died), ``/metrics`` (vLLM's metric names).
With ``VLLM_CACHE_ROOT`` set, its compile cache lives there, as vLLM's does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from launchers.simengine.core import EngineDead
from launchers.simengine.engine import SimEngine
from launchers.simengine.errors import EngineRefused
from launchers.simengine.live import LiveEngine
from launchers.simengine.metrics_text import prometheus_text
from launchers.simengine.tokens import chat_prompt, natural_length, output_text, token_ids


class _BadRequest(Exception):
    pass


def build_app(engine: SimEngine) -> Starlette:
    """The Starlette app serving ``engine`` (its engine loop starts with the app)."""
    live = LiveEngine(engine)
    name = engine.cfg.served_name

    async def health(_: Request) -> Response:
        return Response(status_code=503 if live.dead else 200)

    async def models(_: Request) -> Response:
        card = {
            "id": name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": engine.cfg.model,
            "max_model_len": engine.cfg.max_model_len,
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def metrics(_: Request) -> Response:
        return PlainTextResponse(prometheus_text(engine.server_counters(), name))

    async def completions(request: Request) -> Response:
        return await _serve(request, chat=False)

    async def chat(request: Request) -> Response:
        return await _serve(request, chat=True)

    async def _serve(request: Request, chat: bool) -> Response:
        try:
            body = await request.json()
            ids, max_tokens = _parse(body, chat, engine.cfg.max_model_len)
        except (_BadRequest, ValueError, TypeError, KeyError) as err:
            return _error(str(err), 400)
        if live.dead:
            return _error(f"EngineDeadError: {live.dead}", 500)
        length = max_tokens if body.get("ignore_eos") else natural_length(ids, max_tokens)
        gen = _Generation(live, name, chat, ids, length, max_tokens, body)
        if body.get("stream"):
            return StreamingResponse(gen.sse(), media_type="text/event-stream")
        try:
            return JSONResponse(await gen.whole())
        except EngineDead as dead:
            return _error(f"EngineDeadError: {dead}", 500)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        live.start()
        yield
        await live.stop()

    routes = [
        Route("/health", health),
        Route("/v1/models", models),
        Route("/metrics", metrics),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def _parse(body: dict[str, Any], chat: bool, max_len: int) -> tuple[list[int], int]:
    if chat:
        ids = token_ids(chat_prompt(body["messages"]))
    else:
        prompt = body["prompt"]
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], list):
            prompt = prompt[0]  # a batch of one token-id prompt
        ids = token_ids(prompt)
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    max_tokens = int(limit) if limit is not None else (max_len - len(ids) if chat else 16)
    if max_tokens < 1 or len(ids) + max_tokens > max_len:
        raise _BadRequest(
            f"This model's maximum context length is {max_len} tokens. However, you requested "
            f"{len(ids) + max_tokens} tokens ({len(ids)} in the messages, {max_tokens} in the "
            "completion). Please reduce the length of the messages or completion."
        )
    return ids, max_tokens


def _error(message: str, code: int) -> JSONResponse:
    kind = "BadRequestError" if code == 400 else "InternalServerError"
    body = {"object": "error", "message": message, "type": kind, "param": None, "code": code}
    return JSONResponse(body, status_code=code)


class _Generation:
    """One request's OpenAI-format output, streamed or whole."""

    def __init__(
        self,
        live: LiveEngine,
        model: str,
        chat: bool,
        ids: list[int],
        length: int,
        max_tokens: int,
        body: Mapping[str, Any],
    ) -> None:
        self.live, self.model, self.chat, self.ids = live, model, chat, ids
        self.length, self.max_tokens = length, max_tokens
        opts = body.get("stream_options") or {}
        self.include_usage = bool(opts.get("include_usage"))
        # vLLM's return_tokens_as_token_ids: the answer's ids, as the simulated model decodes.
        self.as_ids = body.get("logprobs") is not None and bool(
            body.get("return_tokens_as_token_ids")
        )
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.produced = 0

    async def _chunks(self) -> AsyncIterator[tuple[str, str | None]]:
        async for tokens in self.live.generate(self.ids, self.length):
            text = output_text(self.produced, tokens)
            self.produced += tokens
            yield text, self._finish(self.produced)

    def _ids(self) -> dict[str, Any] | None:
        if not self.as_ids:
            return None
        ids = self.live.engine.answer(self.ids, self.produced)
        return {"tokens": [f"token_id:{t}" for t in ids]}

    def _finish(self, done: int) -> str | None:
        if done < self.length:
            return None
        return "length" if self.length >= self.max_tokens else "stop"

    def _usage(self, completion: int) -> dict[str, int]:
        return {
            "prompt_tokens": len(self.ids),
            "total_tokens": len(self.ids) + completion,
            "completion_tokens": completion,
        }

    def _choice(self, text: str, finish: str | None, first: bool) -> dict[str, Any]:
        if self.chat:
            delta: dict[str, str] = (
                {"role": "assistant", "content": text} if first else {"content": text}
            )
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
        }

    def _envelope(self, choices: list[dict[str, Any]], usage: dict[str, int] | None) -> str:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        obj = {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if usage is not None or not self.chat:
            obj["usage"] = usage
        return f"data: {json.dumps(obj)}\n\n"

    async def sse(self) -> AsyncIterator[str]:
        first = True
        try:
            async for text, finish in self._chunks():
                yield self._envelope([self._choice(text, finish, first)], None)
                first = False
        except EngineDead as dead:
            err = {"object": "error", "message": f"EngineDeadError: {dead}", "code": 500}
            yield f"data: {json.dumps({'error': err})}\n\n"
            return
        if self.include_usage:
            yield self._envelope([], self._usage(self.produced))
        yield "data: [DONE]\n\n"

    async def whole(self) -> dict[str, Any]:
        parts = [text async for text, _ in self._chunks()]
        text = "".join(parts)
        finish = self._finish(self.produced)
        choice: dict[str, Any]
        if self.chat:
            msg = {"role": "assistant", "content": text}
            choice = {"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": self._ids(), "finish_reason": finish}
        kind = "chat.completion" if self.chat else "text_completion"
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self._usage(self.produced),
        }


def _sim_flags(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--sim-profile", default=os.environ.get("SIM_PROFILE", "h200x4"))
    p.add_argument("--sim-seed", type=int, default=int(os.environ.get("SIM_SEED", "0")))
    p.add_argument(
        "--sim-startup-delay", type=float, default=float(os.environ.get("SIM_STARTUP_DELAY", "0"))
    )
    p.add_argument("--sim-version", default=os.environ.get("SIM_VERSION") or None)
    return p.parse_known_args(list(argv))


def serve(
    argv: Sequence[str],
    env: Mapping[str, str],
    profile: str,
    seed: int,
    startup_delay: float,
    version: str | None = None,
) -> int:
    """Starts the engine as ``vllm serve`` would and serves until interrupted; exit status."""
    import uvicorn

    def say(line: str) -> None:
        print(f"INFO {line}", file=sys.stderr, flush=True)

    # vLLM's cache folder when it is named: a container mounts it (the docker launcher's
    # cache dirs) so restarts reuse it; unnamed, nothing is written to the home folder.
    cache = env.get("VLLM_CACHE_ROOT")
    try:
        engine = SimEngine.from_argv(
            argv, env, profile, seed, Path(cache) if cache else None, version
        )
    except EngineRefused as err:
        print(f"ERROR {err}", file=sys.stderr, flush=True)
        return err.exit_code
    for line in engine.lines:
        say(line)
    engine.set_log_sink(say)
    time.sleep(startup_delay)  # the port opens only once the engine is ready
    cfg = engine.cfg
    say(f"Starting vLLM API server on http://{cfg.host}:{cfg.port}")
    uvicorn.run(build_app(engine), host=cfg.host, port=cfg.port, log_level="warning")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m launchers.sim [vllm serve flags] [--sim-*]``."""
    sim, rest = _sim_flags(sys.argv[1:] if argv is None else argv)
    return serve(
        rest, os.environ, sim.sim_profile, sim.sim_seed, sim.sim_startup_delay, sim.sim_version
    )


if __name__ == "__main__":
    sys.exit(main())
