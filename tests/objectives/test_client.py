from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx
import pytest

from objectives.client import (
    StreamingClient,
    http_failure,
    make_http_client,
    request_body,
    server_message,
    server_root,
)
from objectives.metrics import LENGTH_NOT_HONOURED, failure_reason
from objectives.records import BenchRequest, RequestRecord
from tests.objectives.servers import vllm_like_server

REQ = BenchRequest(prompt=[101, 102, 103], prompt_len=3, output_len=6)


async def send_all(
    base: str, models: list[str], api: str = "completions", timeout: float = 10.0
) -> list[RequestRecord]:
    async with make_http_client(base, timeout) as http:
        client = StreamingClient(http, api, timeout)  # type: ignore[arg-type]
        bodies = [request_body(REQ, m, api) for m in models]  # type: ignore[arg-type]
        return list(await asyncio.gather(*(client.send(REQ, b) for b in bodies)))


def test_body_asks_for_exact_length_and_usage() -> None:
    body = json.loads(request_body(REQ, "m", "completions"))
    assert body["prompt"] == [101, 102, 103] and body["max_tokens"] == 6
    assert body["ignore_eos"] is True and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    chat = json.loads(request_body(BenchRequest("hi there", 2, 4), "m", "chat"))
    assert chat["messages"] == [{"role": "user", "content": "hi there"}]
    assert chat["max_completion_tokens"] == 4
    assert server_root("http://h:1/v1/") == "http://h:1"


def test_paced_stream_is_timed_per_chunk(paced_server: str) -> None:
    (rec,) = asyncio.run(send_all(paced_server, ["paced"]))
    assert rec.success and rec.error is None
    assert len(rec.chunk_times) == 6 and rec.output_tokens == 6 and rec.prompt_tokens == 1
    assert rec.ttft is not None and 0.015 < rec.ttft < 5.0
    gaps = [b - a for a, b in zip(rec.chunk_times, rec.chunk_times[1:], strict=False)]
    assert 0.005 < sum(gaps) / len(gaps) < 2.0  # paced 10 ms apart (sanity, not timing)
    assert failure_reason(rec) is None


def test_chat_stream(paced_server: str) -> None:
    (rec,) = asyncio.run(send_all(paced_server, ["paced"], api="chat"))
    assert rec.success and len(rec.chunk_times) == 6 and rec.output_tokens == 6


def test_failures_keep_their_reason(paced_server: str) -> None:
    models = ["http-500", "broken", "malformed", "no-done", "short", "no-usage", "usage-on-last"]
    recs = dict(zip(models, asyncio.run(send_all(paced_server, models)), strict=True))
    assert recs["http-500"].error == "HTTP 500: boom" and not recs["http-500"].chunk_times
    assert recs["broken"].error == "stream broken" and len(recs["broken"].chunk_times) == 2
    assert recs["malformed"].error == "malformed chunk"
    assert recs["no-done"].error == "stream broken"
    assert recs["short"].success and failure_reason(recs["short"]) == LENGTH_NOT_HONOURED
    assert recs["no-usage"].success and recs["no-usage"].output_tokens == 6  # counted chunks
    last = recs["usage-on-last"]
    assert last.success and last.output_tokens == 6 and len(last.chunk_times) == 6
    assert all(not r.success for r in (recs["http-500"], recs["broken"], recs["malformed"]))


def test_timeout(paced_server: str) -> None:
    (rec,) = asyncio.run(send_all(paced_server, ["slow"], timeout=0.3))
    assert rec.error == "timeout" and not rec.success


def test_refused_connection_says_so() -> None:
    (rec,) = asyncio.run(send_all("http://127.0.0.1:9", ["paced"]))
    assert rec.error == "connection refused"


def test_stale_keepalive_connection_is_retried_once() -> None:
    calls = {"n": 0}
    ok = (
        b'data: {"choices":[{"text":"a"}]}\n\n'
        b'data: {"choices":[],"usage":{"completion_tokens":1}}\n\ndata: [DONE]\n\n'
    )

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, stream=httpx.ByteStream(ok))

    async def go() -> RequestRecord:
        async with httpx.AsyncClient(
            transport=httpx.MockTransport(handler), base_url="http://x"
        ) as http:
            client = StreamingClient(http, "completions", 5.0)
            req = BenchRequest([1], 1, 1)
            return await client.send(req, request_body(req, "m", "completions"))

    rec = asyncio.run(go())
    assert rec.success and calls["n"] == 2 and rec.output_tokens == 1


def test_token_chunks_recognised_without_parsing_and_others_parsed() -> None:
    from objectives.client import _StreamState

    rec = RequestRecord(1, 3, 0.0)
    state = _StreamState()
    payloads = [
        b'{"choices":[{"index":0,"text":" a"}]}',  # compact (vLLM, llama.cpp)
        b'{"choices": [{"index": 0, "text": " b"}]}',  # spaced (json.dumps defaults)
        b'{"choices":[],"text":"\\"choices\\": [{"}',  # the pattern only inside a string
        b'{"choices":[{"text":" c"}],"usage":{"completion_tokens":3,"prompt_tokens":1}}',
        b"[DONE]",
    ]
    for i, payload in enumerate(payloads):
        state.event(payload, float(i), rec)
    state.finish(rec)
    assert rec.chunk_times == [0.0, 1.0, 3.0]
    assert rec.output_tokens == 3 and rec.prompt_tokens == 1 and rec.error is None


VOCAB_ERROR = {
    "error": {
        "message": "Token id 31991 is out of vocabulary",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
}


def send_mocked(handler: Callable[[httpx.Request], httpx.Response]) -> RequestRecord:
    async def go() -> RequestRecord:
        transport = httpx.MockTransport(handler)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as http:
            client = StreamingClient(http, "completions", 5.0)
            return await client.send(REQ, request_body(REQ, "m", "completions"))

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (400, json.dumps(VOCAB_ERROR), "HTTP 400: Token id 31991 is out of vocabulary"),
        (400, '{"object": "error", "message": "too long"}', "HTTP 400: too long"),  # older vLLM
        (422, '{"detail": "Field required"}', "HTTP 422: Field required"),  # FastAPI
        (
            503,
            "<html>\n<b>Service Unavailable</b>\n</html>",
            "HTTP 503: <html> <b>Service Unavailable</b> </html>",
        ),
        (500, "", "HTTP 500"),
        (502, "x" * 1000, "HTTP 502: " + "x" * 297 + "..."),
    ],
)
def test_a_refusal_keeps_the_status_and_the_server_message(
    status: int, body: str, reason: str
) -> None:
    rec = send_mocked(lambda _: httpx.Response(status, content=body.encode()))
    assert rec.error == reason and not rec.success
    assert failure_reason(rec) == reason


def test_an_error_event_in_a_200_stream_is_the_failure_reason() -> None:
    # vLLM 0.32 refuses a streamed prompt this way: HTTP 200, one error event, [DONE].
    stream = f"data: {json.dumps(VOCAB_ERROR)}\n\ndata: [DONE]\n\n".encode()
    rec = send_mocked(lambda _: httpx.Response(200, stream=httpx.ByteStream(stream)))
    assert rec.error == "HTTP 400: Token id 31991 is out of vocabulary" and not rec.success
    mid = (
        b'data: {"choices":[{"text":"a"}]}\n\n'
        b'data: {"error":{"message":"Internal server error","code":500}}\n\ndata: [DONE]\n\n'
    )
    rec = send_mocked(lambda _: httpx.Response(200, stream=httpx.ByteStream(mid)))
    assert rec.error == "HTTP 500: Internal server error" and len(rec.chunk_times) == 1


def test_message_helpers() -> None:
    assert server_message({"error": "boom"}) == "boom"
    assert server_message(b"[1, 2]") == "[1, 2]"
    assert http_failure(None, {"error": {"message": "m"}}) == "server error: m"


@pytest.mark.parametrize("errors", ["stream", "http"])
def test_a_real_server_refusing_a_token_id_says_which(errors: str) -> None:
    big = BenchRequest(prompt=[5, 31991], prompt_len=2, output_len=2)
    with vllm_like_server("--vocab", "961", "--errors", errors) as url:

        async def go() -> RequestRecord:
            async with make_http_client(url, 10.0) as http:
                client = StreamingClient(http, "completions", 10.0)
                return await client.send(big, request_body(big, "tiny", "completions"))

        rec = asyncio.run(go())
    assert rec.error == "HTTP 400: Token id 31991 is out of vocabulary"
