"""The shapes every benchmark producer and consumer agree on.

A ``BenchRequest`` is what a dataset yields and a load generator sends; a ``RequestRecord`` is
what came back, with raw timestamps. The HTTP client stamps records with ``time.perf_counter``;
the simulated engine running in virtual time stamps them with virtual seconds. Metrics are
computed from records by one function whoever produced them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BenchRequest:
    """One request of a workload.

    ``prompt`` is what an HTTP client sends (text, or token ids for ``/v1/completions``);
    ``prompt_len`` is its length in tokens as the dataset counted it. Requests with the same
    ``prefix_key`` share their first ``prefix_len`` tokens exactly (prefix-cache reuse).
    """

    prompt: str | list[int]
    prompt_len: int
    output_len: int
    prefix_key: str | None = None
    prefix_len: int = 0


@dataclass(slots=True)
class RequestRecord:
    """What one request measured, as raw timestamps (seconds, one clock per run).

    ``chunk_times`` holds the arrival time of every streamed chunk that carried ``choices``
    content, so TTFT = chunk_times[0] - send_time, ITL = successive gaps, and
    E2EL = chunk_times[-1] - send_time, exactly as ``vllm bench serve`` defines them.
    """

    prompt_len: int
    output_len: int  # tokens asked for
    send_time: float
    chunk_times: list[float] = field(default_factory=list)
    output_tokens: int = 0  # usage.completion_tokens (or counted tokens when usage is absent)
    prompt_tokens: int | None = None  # usage.prompt_tokens when the server reports it
    success: bool = False
    # Why it failed: "HTTP 400: <the server's message>", "stream broken", "timeout", ...
    error: str | None = None

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.send_time if self.chunk_times else None

    @property
    def e2el(self) -> float | None:
        return self.chunk_times[-1] - self.send_time if self.chunk_times else None
