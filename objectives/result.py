"""One tier's result: its metrics in ``vllm bench serve``'s layout, plus what else it saw.

``to_dict`` puts vLLM's result keys on top (``max_concurrency``, ``request_rate``, then every
metric), so scripts that read ``vllm bench serve`` JSON read ours; the server's counters, the
client's lag figures, failures by reason and missed SLOs follow.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from objectives.metrics import METRIC_KEYS, WINDOW_KEYS


@dataclass
class TierResult:
    """Everything measured at one concurrency tier; ``to_json`` keeps vLLM's keys on top.

    ``client_saturated`` marks a tier the client, not the server, limited: its numbers say
    nothing about the config. ``client`` holds the client's own lag figures. ``notes`` say
    why figures are missing (a steady-state window too short to measure).
    """

    concurrency: int
    metrics: dict[str, float | int]
    failures: dict[str, int] = field(default_factory=dict)
    server: dict[str, float] = field(default_factory=dict)
    client_saturated: bool = False
    client: dict[str, float] = field(default_factory=dict)
    slo_violations: list[str] = field(default_factory=list)
    request_rate: float | None = None
    burstiness: float = 1.0
    notes: list[str] = field(default_factory=list)
    # Each request's TTFT, TPOT, E2EL and end in seconds, request order (objectives.race):
    # what a later launch's requests are paired against. Empty for a tier stopped early.
    requests: dict[str, list[float | None]] = field(default_factory=dict)
    # Requests a tier stopped early rests on, once its launch was out of contention there
    # (objectives.race); None: every request of the tier was measured.
    decided_after: int | None = None

    @property
    def has_failures(self) -> bool:
        return bool(self.failures)

    def to_dict(self) -> dict[str, Any]:
        body = asdict(self)
        metrics = body.pop("metrics")
        # vLLM's result layout: metric keys at top level, plus its run fields.
        return {
            "max_concurrency": self.concurrency,
            "request_rate": self.request_rate if self.request_rate else "inf",
            **metrics,
            **{k: v for k, v in body.items() if k not in ("concurrency", "request_rate")},
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TierResult:
        rate = data.get("request_rate", "inf")
        return cls(
            concurrency=int(data["max_concurrency"]),
            metrics={k: data[k] for k in (*METRIC_KEYS, *WINDOW_KEYS) if k in data},
            failures=dict(data.get("failures", {})),
            server=dict(data.get("server", {})),
            client_saturated=bool(data.get("client_saturated", False)),
            client=dict(data.get("client", {})),
            slo_violations=list(data.get("slo_violations", [])),
            request_rate=None if rate in ("inf", None) else float(rate),
            burstiness=float(data.get("burstiness", 1.0)),
            notes=list(data.get("notes", [])),
            requests={k: list(v) for k, v in (data.get("requests") or {}).items()},
            decided_after=data.get("decided_after"),
        )

    @classmethod
    def from_json(cls, text: str) -> TierResult:
        return cls.from_dict(json.loads(text))
