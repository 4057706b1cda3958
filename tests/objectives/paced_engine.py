"""A virtual engine with known pacing, so runner figures can be checked exactly.

Each request takes ``ttft_s`` to its first token and ``itl_s`` per further token; ``N`` slots
serve requests in order (a closed loop of N in flight). It implements the ``VirtualEngine``
protocol in full, prefix-cache counters included.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from objectives.records import BenchRequest, RequestRecord


class PacedEngine:
    def __init__(self, ttft_s: float = 0.1, itl_s: float = 0.01, cap: int | None = None) -> None:
        self.ttft_s, self.itl_s, self.cap = ttft_s, itl_s, cap
        self.clock = 0.0
        self.runs: list[tuple[int, int, float | None]] = []
        self.counters = {
            "vllm:prefix_cache_queries_total": 0.0,
            "vllm:prefix_cache_hits_total": 0.0,
            "vllm:num_preemptions_total": 0.0,
        }
        self._seen: set[str] = set()

    def run(
        self,
        requests: Sequence[BenchRequest],
        concurrency: int,
        request_rate: float | None = None,
        burstiness: float = 1.0,
    ) -> list[RequestRecord]:
        self.runs.append((len(requests), concurrency, request_rate))
        arrivals = self._arrivals(len(requests), request_rate, burstiness)
        free = [self.clock] * concurrency
        out = []
        for req, arrive in zip(requests, arrivals, strict=True):
            send = max(heapq.heappop(free), arrive)
            tokens = min(req.output_len, self.cap or req.output_len)
            chunks = [send + self.ttft_s + i * self.itl_s for i in range(tokens)]
            heapq.heappush(free, chunks[-1])
            out.append(
                RequestRecord(
                    req.prompt_len, req.output_len, send, chunks, tokens, req.prompt_len, True
                )
            )
            self._count_prefix(req)
        self.clock = max(r.chunk_times[-1] for r in out)
        return out

    def _arrivals(self, n: int, rate: float | None, burstiness: float) -> list[float]:
        if rate is None:
            return [self.clock] * n
        gaps = np.random.default_rng(0).gamma(burstiness, 1 / (rate * burstiness), size=n)
        return list(self.clock + np.cumsum(gaps))

    def _count_prefix(self, req: BenchRequest) -> None:
        self.counters["vllm:prefix_cache_queries_total"] += req.prompt_len
        if req.prefix_key in self._seen:
            self.counters["vllm:prefix_cache_hits_total"] += req.prefix_len
        if req.prefix_key:
            self._seen.add(req.prefix_key)

    def server_counters(self) -> dict[str, float]:
        return dict(self.counters)

    def gauge_peaks(self) -> dict[str, float]:
        return {}
