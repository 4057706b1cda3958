"""What measuring needs to know about a ready engine: where it serves.

A launcher produces an ``Endpoint`` once its engine is ready; the benchmark client consumes it.
Both types live here, on the measuring side, so that measuring does not depend on how an
engine was launched (the launching side imports this module, never the other way round).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from objectives.records import BenchRequest, RequestRecord


class VirtualEngine(Protocol):
    """An engine that runs a workload in virtual time instead of over HTTP (the simulator)."""

    def run(
        self,
        requests: Sequence[BenchRequest],
        concurrency: int,
        request_rate: float | None = None,
        burstiness: float = 1.0,
    ) -> list[RequestRecord]:
        """Serve ``requests`` with ``concurrency`` in flight; records carry virtual seconds."""
        ...

    def server_counters(self) -> dict[str, float]:
        """Cumulative server-side counters, named as vLLM's ``/metrics`` names them."""
        ...

    def gauge_peaks(self) -> dict[str, float]:
        """Each gauge's largest value during the last ``run`` (what scrapes during a tier of
        a real server sample), named as vLLM's ``/metrics`` names them."""
        ...


@dataclass(frozen=True)
class Endpoint:
    """Where a ready engine serves: an HTTP base URL, or a virtual engine (exactly one).

    ``api_key``, when set, goes with every HTTP request as ``Authorization: Bearer``; it is a
    secret and is left out of the repr.
    """

    model: str
    base_url: str | None = None
    virtual: VirtualEngine | None = None
    api_key: str | None = field(default=None, repr=False)


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The header that carries ``api_key`` (none without a key)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def sent_key(headers: Mapping[str, str]) -> str | None:
    """The API key a client's headers carry (``auth_headers``'s inverse; None: none)."""
    value = headers.get("Authorization") or ""
    return value.removeprefix("Bearer ") if value.startswith("Bearer ") else None
