"""Where one launch's time went: start-up, warm-up and each tier, apart.

A trial pays for its engine's start-up (weights, compile, graph capture: minutes on a GPU node)
before it measures anything, so a study's hours are not its benchmarks' hours. The runner fills
a ``TrialTimes`` as the phases end, so a trial that fails midway keeps what it spent; the
trial record stores it (``tuner.record.trial.write_times``). Seconds are on the engine's clock:
the wall clock's for a real engine, the virtual clock's for the simulated one, which stands
for the hardware's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TrialTimes:
    """One launch's phases in seconds (None: the phase was not reached)."""

    startup_s: float | None = None  # start() until ready, or until the launch failed
    ready: bool = False  # whether the engine got ready (a failed start-up's time is lost)
    warmup_s: float | None = None
    tiers_s: dict[str, float] = field(default_factory=dict)  # by concurrency, as in ``tiers``
    compile_key: str | None = None  # the engine's compile-cache key, as its log names it
    compile_cached: bool | None = None  # whether that entry was there already
    quality_s: float | None = None  # the probe answers and the space's quality command

    @property
    def launched(self) -> bool:
        return self.startup_s is not None

    @property
    def benchmark_s(self) -> float:
        """Warm-up, tiers and quality checks: the time the engine served the benchmark."""
        return (self.warmup_s or 0.0) + sum(self.tiers_s.values()) + (self.quality_s or 0.0)

    @property
    def total_s(self) -> float:
        return (self.startup_s or 0.0) + self.benchmark_s

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> TrialTimes | None:
        """The stored form read back (None: the trial launched nothing, or predates times)."""
        if not data:
            return None
        return cls(
            startup_s=_seconds(data.get("startup_s")),
            ready=bool(data.get("ready")),
            warmup_s=_seconds(data.get("warmup_s")),
            tiers_s={str(k): float(v) for k, v in (data.get("tiers_s") or {}).items()},
            compile_key=data.get("compile_key"),
            compile_cached=data.get("compile_cached"),
            quality_s=_seconds(data.get("quality_s")),
        )


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None
