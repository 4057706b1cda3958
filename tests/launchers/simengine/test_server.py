"""The HTTP server: endpoints, SSE streaming (one chunk per token), usage, health, metrics."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable

import httpx
import pytest

from tests.launchers.simengine.conftest import free_port

MODEL = "MiniMaxAI/MiniMax-M2.5"


def stream(url: str, path: str, body: dict) -> tuple[list[dict], list[float]]:
    """Data events of one streamed request and their arrival times."""
    events, times = [], []
    with httpx.stream("POST", url + path, json={**body, "stream": True}, timeout=30) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
                times.append(time.perf_counter())
    return events, times


def test_health_models_and_metrics(sim_server: Callable[..., str]) -> None:
    url = sim_server(["--served-model-name", "mm"])
    assert httpx.get(url + "/health").status_code == 200
    card = httpx.get(url + "/v1/models").json()["data"][0]
    assert card["id"] == "mm" and card["max_model_len"] == 196608
    httpx.post(url + "/v1/completions", json={"prompt": list(range(100, 400)), "max_tokens": 3})
    text = httpx.get(url + "/metrics").text
    for name in (
        "vllm:num_preemptions_total",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:spec_decode_num_accepted_tokens_total",
    ):
        assert f"\n{name}{{" in "\n" + text, name
    assert 'vllm:prefix_cache_queries_total{engine="0",model_name="mm"} 300.0' in text


def test_completions_stream_one_chunk_per_token_with_usage(
    sim_server: Callable[..., str],
) -> None:
    url = sim_server()
    body = {
        "model": MODEL,
        "prompt": " a b c d e f g h",
        "max_tokens": 12,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    events, times = stream(url, "/v1/completions", body)
    chunks = [e for e in events if e["choices"]]
    assert len(chunks) == 12
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["choices"] == []
    assert events[-1]["usage"] == {"prompt_tokens": 8, "completion_tokens": 12, "total_tokens": 20}
    assert times[11] - times[0] > 0.05  # paced in real time: 11 decode steps of ~10 ms


def test_chat_stream_and_no_usage_unless_asked(sim_server: Callable[..., str]) -> None:
    url = sim_server()
    body = {
        "messages": [{"role": "user", "content": "fix the bug"}],
        "max_tokens": 5,
        "ignore_eos": True,
    }
    events, _ = stream(url, "/v1/chat/completions", body)
    assert len(events) == 5 and all("usage" not in e for e in events)
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(e["choices"][0]["delta"]["content"] for e in events).count(" ") == 5


def test_token_id_prompt_and_non_streamed_response(sim_server: Callable[..., str]) -> None:
    url = sim_server()
    r = httpx.post(
        url + "/v1/completions",
        json={"prompt": list(range(100, 1100)), "max_tokens": 7, "ignore_eos": True},
    )
    out = r.json()
    assert out["usage"] == {"prompt_tokens": 1000, "completion_tokens": 7, "total_tokens": 1007}
    assert out["choices"][0]["text"].count(" ") == 7


@pytest.mark.slow  # a long stream with no ignore_eos: seconds of serving
def test_without_ignore_eos_a_request_may_stop_early(sim_server: Callable[..., str]) -> None:
    url = sim_server()
    r = httpx.post(
        url + "/v1/completions", json={"prompt": "x y z", "max_tokens": 2000}, timeout=60
    )
    out = r.json()
    assert out["usage"]["completion_tokens"] < 2000
    assert out["choices"][0]["finish_reason"] == "stop"


def test_too_long_request_is_a_400(sim_server: Callable[..., str]) -> None:
    url = sim_server(["--max-model-len", "4096"])
    r = httpx.post(url + "/v1/completions", json={"prompt": list(range(4000)), "max_tokens": 200})
    assert r.status_code == 400 and "maximum context length is 4096" in r.json()["message"]


def test_speculative_decoding_streams_several_tokens_per_chunk(
    sim_server: Callable[..., str],
) -> None:
    spec = '{"method": "eagle3", "num_speculative_tokens": 3}'
    url = sim_server(["--speculative-config", spec])
    body = {
        "prompt": list(range(100, 300)),
        "max_tokens": 60,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    events, _ = stream(url, "/v1/completions", body)
    chunks = [e for e in events if e["choices"]]
    assert events[-1]["usage"]["completion_tokens"] == 60
    assert len(chunks) < 60  # 1 + accepted tokens per chunk
    metrics = httpx.get(url + "/metrics").text
    assert "vllm:spec_decode_num_drafts_total" in metrics


def test_crash_under_load_turns_health_503(sim_server: Callable[..., str]) -> None:
    url = sim_server(
        ["--moe-backend", "triton", "--max-num-batched-tokens", "131072"], version="0.17.1"
    )
    r = httpx.post(
        url + "/v1/completions", json={"prompt": list(range(100_000)), "max_tokens": 2}, timeout=60
    )
    assert r.status_code == 500 and "illegal memory access" in r.json()["message"]
    assert httpx.get(url + "/health").status_code == 503


def _serve(*args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "launchers.sim", "-tp", "4", "--enable-expert-parallel", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_process_refuses_with_vllm_line_and_nonzero_exit() -> None:
    proc = _serve("--max-num-batched-tokens", "16", "--max-num-seqs", "64")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "max_num_batched_tokens (16) must be greater than or equal to max_num_seqs" in err
    proc = _serve("--no-such-flag")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "unrecognized arguments: --no-such-flag" in err
    proc = _serve("--sim-version", "0.16", "--moe-backend", "triton")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "unrecognized arguments: --moe-backend (vLLM 0.16)" in err


def test_process_opens_port_after_startup_delay() -> None:
    port = free_port()
    proc = _serve("--port", str(port), "--host", "127.0.0.1", "--sim-startup-delay", "1.0")
    try:
        started = time.monotonic()
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() - started < 60
            time.sleep(0.1)
        assert time.monotonic() - started >= 0.9
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    pytest.main([__file__])
