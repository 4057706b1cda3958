"""The real ``llama-server`` built by scripts/build_llama_server.sh, serving our GGUF model.

These pin the engine facts the tuner relies on: exact output lengths (one token per streamed
chunk), usage in streams, ``ignore_eos``, ``n_predict``, and the ``llamacpp:*`` metric names.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from objectives.client import StreamingClient, make_http_client, request_body
from objectives.records import BenchRequest
from tests.scripts._llama import SCRIPTS, running_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def models(gguf_script: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    small = gguf_script.PRESETS["small"]
    return {
        eos: gguf_script.write_model(root / f"{eos}.gguf", gguf_script.Shape(**small), 3, eos)
        for eos in ("ban", "favour")
    }


@pytest.fixture(scope="module")
def server(
    llama_server_bin: Path, models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    log = tmp_path_factory.mktemp("logs") / "server.log"
    with running_server(llama_server_bin, models["ban"], "-np", "4", "--metrics", log=log) as url:
        yield url


def _events(url: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every JSON event of one streamed response."""
    events = []
    headers = {"Connection": "close"}  # llama-server drops kept-alive connections after a stream
    with httpx.stream("POST", url + path, json=body, headers=headers, timeout=60) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    return events


def _text(event: dict[str, Any]) -> str:
    choices = event.get("choices") or [{}]
    return str(choices[0].get("text") or (choices[0].get("delta") or {}).get("content") or "")


def test_build_script_reuses_the_cached_binary(llama_server_bin: Path) -> None:
    before = llama_server_bin.stat().st_mtime_ns
    again = subprocess.run(
        [str(SCRIPTS / "build_llama_server.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(again.stdout.strip()) == llama_server_bin
    assert llama_server_bin.stat().st_mtime_ns == before
    assert "building" not in again.stderr


def test_completions_stream_one_token_per_chunk(server: str) -> None:
    body = {"prompt": [100, 200, 300, 400], "max_tokens": 24, "stream": True, "cache_prompt": False}
    events = _events(server, "/v1/completions", body)
    texts = [_text(e) for e in events if _text(e)]
    assert len(texts) == 24
    last = events[-1]  # the last chunk carries both choices and usage
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["usage"]["completion_tokens"] == 24 and last["usage"]["prompt_tokens"] == 4


def test_chat_stream_reports_usage_when_asked(server: str) -> None:
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": "Say something."}],
        "max_tokens": 16,
        "stream": True,
    }
    assert not [e for e in _events(server, "/v1/chat/completions", body) if e.get("usage")]
    body["stream_options"] = {"include_usage": True}
    events = _events(server, "/v1/chat/completions", body)
    assert len([e for e in events if _text(e)]) == 16
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 16


def test_n_predict_overrides_max_tokens(server: str) -> None:
    body = {"prompt": "abc", "max_tokens": 16, "n_predict": 5}
    done = httpx.post(server + "/v1/completions", json=body, timeout=60).json()
    assert done["usage"]["completion_tokens"] == 5


def test_metrics_use_llamacpp_names(server: str) -> None:
    text = httpx.get(server + "/metrics", timeout=10).text
    for name in (
        "llamacpp:prompt_tokens_total",
        "llamacpp:tokens_predicted_total",
        "llamacpp:requests_processing",
        "llamacpp:requests_deferred",
    ):
        assert f"\n{name} " in text


def test_concurrent_streams_all_complete_with_connection_close(server: str) -> None:
    async def one(client: httpx.AsyncClient, i: int) -> int:
        body = {"prompt": f"request {i}", "max_tokens": 8, "stream": True, "cache_prompt": False}
        n = 0
        async with client.stream(
            "POST", "/v1/completions", json=body, headers={"Connection": "close"}
        ) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: {") and _text(json.loads(line[6:])):
                    n += 1
        return n

    async def run() -> list[int]:
        async with httpx.AsyncClient(base_url=server, timeout=60) as client:
            sem = asyncio.Semaphore(8)

            async def bounded(i: int) -> int:
                async with sem:
                    return await one(client, i)

            return await asyncio.gather(*(bounded(i) for i in range(32)))

    assert asyncio.run(run()) == [8] * 32


def test_ignore_eos_on_a_model_that_wants_to_stop(
    llama_server_bin: Path, models: dict[str, Path], tmp_path: Path
) -> None:
    with running_server(llama_server_bin, models["favour"], log=tmp_path / "eos.log") as url:

        def tokens(ignore_eos: bool) -> int:
            body = {"prompt": "abc", "max_tokens": 16, "ignore_eos": ignore_eos}
            done = httpx.post(url + "/v1/completions", json=body, timeout=60).json()
            return int(done["usage"]["completion_tokens"])

        assert tokens(ignore_eos=False) <= 1
        assert tokens(ignore_eos=True) == 16


def test_streaming_client_loses_no_request(server: str) -> None:
    """llama-server closes kept-alive connections after a stream; the client must not lose any."""
    reqs = [
        BenchRequest(prompt=[100 + i, 200, 300, 400], prompt_len=4, output_len=8) for i in range(48)
    ]

    async def run() -> list[tuple[str | None, int]]:
        http = make_http_client(server, 60)
        client = StreamingClient(http, "completions", 60)
        sem = asyncio.Semaphore(4)

        async def one(req: BenchRequest) -> tuple[str | None, int]:
            async with sem:
                rec = await client.send(req, request_body(req, "m", "completions"))
            return rec.error, rec.output_tokens

        try:
            return await asyncio.gather(*(one(r) for r in reqs))
        finally:
            await http.aclose()

    assert asyncio.run(run()) == [(None, 8)] * len(reqs)
