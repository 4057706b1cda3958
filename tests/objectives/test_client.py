from __future__ import annotations

import asyncio
import json

import httpx

from objectives.client import StreamingClient, make_http_client, request_body, server_root
from objectives.metrics import LENGTH_NOT_HONOURED, failure_reason
from objectives.records import BenchRequest, RequestRecord

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
    assert recs["http-500"].error == "http 500" and not recs["http-500"].chunk_times
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


def test_refused_connection_is_a_broken_stream() -> None:
    (rec,) = asyncio.run(send_all("http://127.0.0.1:9", ["paced"]))
    assert rec.error == "stream broken"


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
