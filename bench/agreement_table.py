"""The runs of ``bench.vllm_agreement`` and their table: per tier and metric, each client's
median over repeats with its range, their ratio and whether they agree."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.vllm_server import SERVER_HISTOGRAMS

CLIENTS = ("tune", "vllm")
SHOWN = ("median_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "output_throughput")
COUNTS = ("completed", "failed", "total_input_tokens", "total_output_tokens", "duration")
AGREE = 0.02  # |tune/vllm - 1| at most this: the two clients agree


def read_result(path: Path, client: str) -> dict[str, float]:
    """The shown metrics and counts of one run: vLLM's keys at the top of its JSON, tune's in
    its one tier (same names, as tune writes vLLM's keys)."""
    data = json.loads(path.read_text())
    tier = data if client == "vllm" else data["tiers"][0]
    out = {k: float(tier[k]) for k in (*SHOWN, *COUNTS)}
    if tier.get("client_saturated"):
        out["client_saturated"] = 1.0
    return out


@dataclass
class Run:
    """One client run at one tier: what it measured and what the machine was doing."""

    client: str
    tier: int
    repeat: int
    metrics: dict[str, float] = field(default_factory=dict)
    rc: int = 0
    load: float = 0.0
    others: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def note(self) -> str:
        """Why this run's figures need a second look ("" when none)."""
        if not self.metrics:
            return f"exit {self.rc}, no result"
        if self.metrics["failed"] or self.rc not in (0, 1):
            return f"exit {self.rc}, {int(self.metrics['failed'])} failed"
        # tune exits 1 for a client-saturated tier; its figures are still written.
        return "tune flagged client-saturated" if self.metrics.get("client_saturated") else ""

    @property
    def ok(self) -> bool:
        return bool(self.metrics) and not self.metrics["failed"] and self.rc in (0, 1)


@dataclass(frozen=True)
class Verdict:
    """tune's and vLLM's values of one metric at one tier, one per repeat."""

    tune: tuple[float, ...]
    vllm: tuple[float, ...]

    @property
    def ratio(self) -> float:
        peer = statistics.median(self.vllm)
        return statistics.median(self.tune) / peer if peer else float("nan")

    @property
    def agree(self) -> bool:
        return abs(self.ratio - 1) <= AGREE

    @property
    def beyond_spread(self) -> bool:
        """The two clients' ranges over repeats do not overlap."""
        return min(self.tune) > max(self.vllm) or max(self.tune) < min(self.vllm)


def verdicts(runs: Sequence[Run], tier: int) -> dict[str, Verdict]:
    """Per shown metric, the tier's values of both clients (runs without a result left out)."""

    def values(client: str, key: str) -> tuple[float, ...]:
        ok = [r for r in runs if r.client == client and r.tier == tier and key in r.metrics]
        return tuple(r.metrics[key] for r in ok)

    out = {}
    for key in (*SHOWN, *SERVER_HISTOGRAMS):
        t, v = values("tune", key), values("vllm", key)
        if t and v:
            out[key] = Verdict(t, v)
    return out


def cell(values: Sequence[float]) -> str:
    med, low, high = statistics.median(values), min(values), max(values)
    return f"{med:>8.2f} [{low:>8.2f} - {high:>8.2f}]"


def verdict_text(v: Verdict) -> str:
    gap = f"{(v.ratio - 1) * 100:+.1f}%"
    agree = f"agree within {AGREE:.0%} ({gap})" if v.agree else f"DIFFER by {gap}"
    return f"{agree}; {'beyond' if v.beyond_spread else 'within'} the spread"


def tier_table(runs: Sequence[Run], tier: int) -> list[str]:
    found = verdicts(runs, tier)
    n = len(next(iter(found.values())).tune) if found else 0
    lines = [
        f"concurrency {tier}: median [min - max] over {n} repeats",
        f"{'metric':<19} {'tune bench':>29} {'vllm bench serve':>29} {'tune/vllm':>9}  verdict",
    ]
    for key, v in found.items():
        lines.append(
            f"{key:<19} {cell(v.tune):>29} {cell(v.vllm):>29} {v.ratio:>9.3f}  {verdict_text(v)}"
        )
    return lines + check_lines(runs, tier)


def check_lines(runs: Sequence[Run], tier: int) -> list[str]:
    """What each client says it sent: requests, prompt and output tokens, duration."""
    lines = []
    for client in CLIENTS:
        mine = [r for r in runs if r.client == client and r.tier == tier]
        done = [r.metrics for r in mine if r.metrics]
        counts = sorted({(int(m["completed"]), int(m["failed"])) for m in done})
        tokens = sorted(
            {(int(m["total_input_tokens"]), int(m["total_output_tokens"])) for m in done}
        )
        dur = ", ".join(f"{m['duration']:.2f}" for m in done)
        bad = [f"r{r.repeat}: {r.note}" for r in mine if r.note]
        lines.append(
            f"  {client:<5} completed/failed {counts}, prompt/output tokens {tokens}, "
            f"duration s [{dur}]{'; ' + ', '.join(bad) if bad else ''}"
        )
    return lines


def run_lines(runs: Sequence[Run]) -> list[str]:
    """One line per run, in the order they ran, with the machine's load at its start."""
    lines = [f"{'run':>3} {'client':<5} {'conc':>4} {'load':>5} {'other vllm':<12} {'wall s':>6}"]
    for i, r in enumerate(runs):
        shown = "  ".join(f"{k}={r.metrics[k]:.2f}" for k in SHOWN if k in r.metrics) or "-"
        others = ",".join(r.others) or "-"
        lines.append(
            f"{i:>3} {r.client:<5} {r.tier:>4} {r.load:>5.2f} {others:<12} {r.wall_s:>6.1f} "
            f" {shown}{'  (' + r.note + ')' if r.note else ''}"
        )
    return lines


def report(tiers: Sequence[int], runs: Sequence[Run]) -> list[str]:
    """Every run, then each tier's table."""
    lines = run_lines(runs)
    for tier in tiers:
        lines += ["", *tier_table(runs, tier)]
    return [*lines, "server_*: the server's own histograms (/metrics) over each client's runs"]
