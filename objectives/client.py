"""Streaming requests to OpenAI-compatible servers, one ``httpx.AsyncClient`` per run.

Each request asks for a fixed output length (``max_tokens`` + ``ignore_eos``), greedy, with
``stream_options.include_usage`` so the server reports the tokens it produced. Every raw read
from the socket is stamped with ``time.perf_counter()`` on arrival; each SSE event completed by
that read counts at that time. A chunk counts as a token event when its ``choices`` list is not
empty, as ``vllm bench serve`` counts them (TTFT = first such chunk, ITL = gaps between them).

Failures keep their reason: ``HTTP <status>: <the server's message>``, ``timeout``,
``connection refused`` (nobody listens; ``connect failed`` for any other connect error),
``stream broken`` (connection lost or the stream ended without ``[DONE]``), ``malformed
chunk``, ``no tokens``. The server's own words are what explain a refusal, so they are kept
verbatim (cut at 300 characters): from a 4xx/5xx body (vLLM's ``{"error": {"message": ...}}``, older
``{"message": ...}``, else the raw text), and from an ``error`` event inside a 200 stream, which
is how vLLM refuses a streamed request whose prompt it rejects (``Token id N is out of
vocabulary``), with the HTTP status it would have sent as ``error.code``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from time import perf_counter
from typing import Any, Literal

import httpx

from objectives.endpoint import auth_headers, sent_key
from objectives.http_conn import MalformedResponse
from objectives.records import BenchRequest, RequestRecord
from objectives.sse import MalformedChunk, SSEParser, decode
from objectives.stall import Progress
from objectives.transport import FRESH_CONNECTION, LeanTransport
from tuner.secret_policy import scrub_text

Api = Literal["completions", "chat"]
PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
MESSAGE_CHARS = 300  # a server message longer than this is cut (an HTML error page...)


def server_root(base_url: str) -> str:
    """``http://host:port`` from a base URL given with or without ``/v1``."""
    return base_url.rstrip("/").removesuffix("/v1")


def request_body(req: BenchRequest, model: str, api: Api) -> bytes:
    """The JSON body of one request (built before a tier starts, to keep sends light)."""
    body: dict[str, Any] = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": req.output_len,
        "ignore_eos": True,
        "temperature": 0.0,
    }
    if api == "completions":
        body["prompt"] = req.prompt
    else:
        text = req.prompt if isinstance(req.prompt, str) else " ".join(map(str, req.prompt))
        body["messages"] = [{"role": "user", "content": text}]
        body["max_completion_tokens"] = req.output_len
    return json.dumps(body, separators=(",", ":")).encode()


def make_http_client(
    base_url: str, timeout_s: float, api_key: str | None = None
) -> httpx.AsyncClient:
    """The run's one client, on the lean streaming transport, with explicit timeouts;
    ``api_key`` goes with every request as ``Authorization: Bearer``."""
    timeout = httpx.Timeout(connect=30.0, read=timeout_s, write=60.0, pool=timeout_s)
    return httpx.AsyncClient(
        base_url=server_root(base_url),
        transport=LeanTransport(),
        timeout=timeout,
        headers=auth_headers(api_key),
    )


class StreamingClient:
    """Sends prepared requests over one ``AsyncClient`` and records what came back; every
    token it reads is told to ``progress`` (the hung-engine watch, ``objectives.stall``)."""

    def __init__(
        self, http: httpx.AsyncClient, api: Api, timeout_s: float, progress: Progress | None = None
    ) -> None:
        self.http, self.path, self.timeout_s = http, PATHS[api], timeout_s
        self.progress = progress
        # A server may repeat the key it was sent in its error message; what is kept is not.
        self.secrets = [key] if (key := sent_key(http.headers)) else []

    async def send(self, req: BenchRequest, body: bytes) -> RequestRecord:
        """Send one request; never raises for a server fault (the record says why)."""
        rec = RequestRecord(req.prompt_len, req.output_len, perf_counter())
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._send_retrying(rec, body)
        except (TimeoutError, httpx.TimeoutException):
            rec.error = "timeout"
        except MalformedChunk:
            rec.error = "malformed chunk"
        except MalformedResponse as err:
            rec.error = f"malformed response: {err}"
        except httpx.ConnectError as err:  # no stream ever began: nobody listens, or no route
            rec.error = "connection refused" if "refused" in str(err).lower() else "connect failed"
        except httpx.HTTPError:
            rec.error = "stream broken"
        rec.success = rec.error is None
        if rec.error is not None:
            rec.error = scrub_text(rec.error, self.secrets)
        return rec

    async def _send_retrying(self, rec: RequestRecord, body: bytes) -> None:
        # A pooled keep-alive connection the server already closed fails before any response
        # (llama-server does this): retry once on a fresh connection, timing from the retry.
        try:
            await self._stream(rec, body)
        except httpx.RemoteProtocolError:
            if rec.chunk_times:
                raise
            rec.send_time = perf_counter()
            await self._stream(rec, body, fresh=True)

    async def _stream(self, rec: RequestRecord, body: bytes, fresh: bool = False) -> None:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "accept-encoding": "identity",
        }
        # A fresh connection, not another pooled one the server may have closed as well.
        extensions = {FRESH_CONNECTION: True} if fresh else None
        async with self.http.stream(
            "POST", self.path, content=body, headers=headers, extensions=extensions
        ) as resp:
            if resp.status_code != 200:
                rec.error = http_failure(resp.status_code, await resp.aread())
                return
            await _read_stream(resp, rec, self.progress)


def http_failure(status: int | None, body: bytes | str | dict[str, Any]) -> str:
    """``HTTP <status>: <message>`` for a refused request, the server's message verbatim."""
    message = server_message(body)
    head = f"HTTP {status}" if status is not None else "server error"
    return f"{head}: {message}" if message else head


def server_message(body: bytes | str | dict[str, Any]) -> str:
    """The message of an error body: vLLM's ``error.message``, ``message``, else the text."""
    if isinstance(body, dict):
        data: Any = body
        text = json.dumps(body)
    else:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        data = _json_or_none(text)
    message = _message_of(data) if isinstance(data, dict) else None
    return _clip(message if message is not None else text)


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # nested past json's depth: not a message either
        return None


def _message_of(data: dict[str, Any]) -> str | None:
    error = data.get("error")
    nested = error.get("message") if isinstance(error, dict) else error
    for value in (nested, data.get("message"), data.get("detail")):  # detail: FastAPI's
        if isinstance(value, str) and value:
            return value
    return None


def _clip(text: str) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= MESSAGE_CHARS:
        return one_line
    return one_line[: MESSAGE_CHARS - 3] + "..."


async def _read_stream(
    resp: httpx.Response, rec: RequestRecord, progress: Progress | None = None
) -> None:
    parser = SSEParser()
    state = _StreamState()
    clock = resp.extensions.get("arrival_time", perf_counter)
    async for raw in resp.aiter_raw():
        now = clock()
        tokens = len(rec.chunk_times)
        for payload in parser.feed(raw):
            state.event(payload, now, rec)
        if progress is not None and len(rec.chunk_times) > tokens:
            progress.event(now)
    for payload in parser.close():
        state.event(payload, perf_counter(), rec)
    state.finish(rec)


class _StreamState:
    __slots__ = ("content_chunks", "done", "usage_tokens")

    def __init__(self) -> None:
        self.done = False
        self.content_chunks = 0
        self.usage_tokens: int | None = None

    def event(self, payload: bytes, now: float, rec: RequestRecord) -> None:
        if _is_plain_token_chunk(payload):
            rec.chunk_times.append(now)
            self.content_chunks += 1
            return
        data = decode(payload)
        if data is None:
            self.done = True
            return
        if data.get("error") and rec.error is None:  # vLLM refusing a streamed request
            rec.error = _stream_error(data)
        if data.get("choices"):
            rec.chunk_times.append(now)
            self.content_chunks += 1
        usage = data.get("usage")
        if isinstance(usage, dict):  # llama.cpp sends it on the last chunk with choices
            self.usage_tokens = usage.get("completion_tokens")
            rec.prompt_tokens = usage.get("prompt_tokens")

    def finish(self, rec: RequestRecord) -> None:
        rec.output_tokens = (
            self.usage_tokens if self.usage_tokens is not None else self.content_chunks
        )
        if rec.error is not None:
            return  # the server said why
        if not self.done:
            rec.error = "stream broken"
        elif not rec.chunk_times:
            rec.error = "no tokens"


def _stream_error(data: dict[str, Any]) -> str:
    # vLLM's in-stream ErrorResponse carries the HTTP status it stands for as ``code``.
    error = data["error"]
    code = error.get("code") if isinstance(error, dict) else None
    return http_failure(code if isinstance(code, int) and code >= 100 else None, data)


_CHOICES = (b'"choices":[{', b'"choices": [{')


def _is_plain_token_chunk(payload: bytes) -> bool:
    # Most events are token chunks: non-empty choices, no usage. Recognised without parsing
    # the JSON (a third of the client's CPU per event); anything else is parsed. Quotes inside
    # JSON strings are escaped, so an unescaped ``"choices": [{`` can only be the key.
    return b'"usage"' not in payload and (_CHOICES[0] in payload or _CHOICES[1] in payload)


def prepare(requests: Sequence[BenchRequest], model: str, api: Api) -> list[bytes]:
    """Request bodies in order, encoded once."""
    return [request_body(r, model, api) for r in requests]
