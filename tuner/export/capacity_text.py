"""``capacity.json`` as text: what ``tune capacity`` prints and ``tune show`` appends.

One row per config (the largest load that held, the least that broke, what broke there and
the spread of that figure over the boundary's runs), the path each search took, then one
line per recommended config against the defaults, and with a demand, the replicas each needs.
"""

from __future__ import annotations

from typing import Any

from objectives.tails import tail_note
from tuner.storage.capacity import (
    CONCURRENCY,
    HELD_TO_BOUND,
    CapacityReport,
    ConfigCapacity,
    Probe,
    ratio,
    replicas,
)

_STATS = {"p99": "P99", "p90": "P90", "median": "median", "mean": "mean", "std": "std"}
_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}


def metric_label(key: str) -> str:
    """``p99_ttft_ms`` -> ``P99 TTFT``; ``output_throughput`` -> ``output throughput``."""
    parts = key.removesuffix("_ms").split("_")
    if len(parts) == 2 and parts[0] in _STATS and parts[1] in _NAMES:
        return f"{_STATS[parts[0]]} {_NAMES[parts[1]]}"
    return key.replace("_", " ")


def figure(key: str, value: float) -> str:
    """A figure in its unit: ``1.82 s`` or ``812 ms`` for a latency, ``463.9`` otherwise."""
    if not key.endswith("_ms"):
        return f"{value:.4g}"
    return f"{value / 1000:.3g} s" if abs(value) >= 1000 else f"{value:.3g} ms"


def slo_label(slo: dict[str, Any]) -> str:
    """``P99 TTFT <= 2 s`` (both bounds where a SLO sets both)."""
    name, key = metric_label(slo["metric"]), slo["metric"]
    bounds = []
    if slo.get("min") is not None:
        bounds.append(f"{name} >= {figure(key, slo['min'])}")
    if slo.get("max") is not None:
        bounds.append(f"{name} <= {figure(key, slo['max'])}")
    return " and ".join(bounds)


def load_text(report: CapacityReport, load: float | None) -> str:
    if load is None:
        return "-"
    return f"{int(load)}" if report.mode == CONCURRENCY else f"{load:.3g}"


def bound_text(report: CapacityReport, config: ConfigCapacity) -> str:
    """What held the config back: its SLO, failed requests, the search's bound."""
    slo = next((s for s in report.slos if s["metric"] == config.bound_by), None)
    if config.bound_by == HELD_TO_BOUND:
        return f"held at the bound, {load_text(report, report.max_load)} {report.unit}"
    return slo_label(slo) if slo is not None else config.bound_by


def probe_line(report: CapacityReport, label: str, probe: Probe) -> str:
    """A progress line: ``c1,c4: c=16 held (P99 TTFT 45.2 s, n=32)``."""
    word = "c=" if report.mode == CONCURRENCY else "rate="
    figures = ", ".join(_shown(k, probe.values) for k in _slo_keys(report) if k in probe.values)
    verdict = f"held ({figures})" if probe.ok else "broke: " + "; ".join(probe.broke)
    again = f" (measured again after {probe.retries} the client limited)" if probe.retries else ""
    return f"{label}: {word}{load_text(report, probe.load)} {verdict}{again}"


def _shown(key: str, values: dict[str, float]) -> str:
    note = tail_note(key, values)
    return f"{metric_label(key)} {figure(key, values[key])}" + (f", {note}" if note else "")


def _slo_keys(report: CapacityReport) -> list[str]:
    return list(dict.fromkeys(s["metric"] for s in report.slos))


def capacity_text(report: CapacityReport, demand: float | None = None, paths: bool = True) -> str:
    """The whole answer as text; ``demand`` (users, or req/s) adds the replicas each needs,
    ``paths`` the loads each search tried."""
    lines = [*_head(report), "", *_table(report), ""]
    lines += [*_paths(report), ""] if paths else []
    lines += [headline(report, c) for c in report.picks()]
    if demand is not None:
        lines += ["", replicas_line(report, demand)]
    lines += [f"{c.label}: {c.failure}" for c in report.configs if c.failure]
    return "\n".join(lines)


def _head(report: CapacityReport) -> list[str]:
    slos = " and ".join(slo_label(s) for s in report.slos)
    what = "users per replica" if report.mode == CONCURRENCY else "requests/s per replica"
    limit = f"at most {load_text(report, report.max_load)} {report.unit}"
    if report.in_flight is not None:
        limit += f", {report.in_flight} in flight"
    return [
        f"capacity of study {report.study!r} ({report.measured_on} launcher, after "
        f"{report.trials} trials): {what} within {slos} (the SLOs of tier c{report.slo_tier})",
        f"one launch per config; doubled to a break, then bisected ({limit}, "
        f"{report.max_steps} probes), then each side of the boundary measured {report.repeats} "
        "times: the answer held in most of its runs, the next step broke in most of its",
    ]


def _table(report: CapacityReport) -> list[str]:
    x = "c" if report.mode == CONCURRENCY else "rate"
    head = (
        f"{'config':<16} {'trial':>5} {report.unit:>7} {'breaks':>7}  {'bound by':<24} "
        f"{'at ' + x + ': median [min - max], held':<38} {'at the break: median [min - max]'}"
    )
    return [head, "-" * len(head), *(_row(report, c) for c in report.configs)]


def _row(report: CapacityReport, c: ConfigCapacity) -> str:
    trial = "-" if c.trial is None else str(c.trial)
    cells = (
        f"{c.label:<16} {trial:>5} {load_text(report, c.capacity):>7} "
        f"{load_text(report, c.above):>7}  {bound_text(report, c)[:24]:<24} "
    )
    metric = shown_metric(report, c)
    at = spread_text(c, c.capacity, metric, held=True)
    return cells + f"{at:<38} {spread_text(c, c.above, metric, held=False)}"


def shown_metric(report: CapacityReport, c: ConfigCapacity) -> str:
    """The SLO metric a config's spread is shown in: the one that bound it, else the first."""
    keys = _slo_keys(report)
    return c.bound_by if c.bound_by in keys else keys[0]


def spread_text(c: ConfigCapacity, load: float | None, metric: str, held: bool) -> str:
    """``metric``'s median [min - max] over the runs at ``load``, and how many of them held
    (``held``) or broke; "-" where nothing was measured there."""
    stats = c.spread(load, metric)
    if stats is None:
        return "-"
    med, low, high = (figure(metric, v) for v in stats)
    good, runs = c.held(load)
    count = f"held {good}" if held else f"broke {runs - good}"
    return f"{med} [{low} - {high}], {count} of {runs}"


def _paths(report: CapacityReport) -> list[str]:
    """Each search as it went: ``1+ 2+ 4+ 8- 6+ 7- | repeats 6+ 7- 7- 6+`` (+ held, - broke)."""
    return [f"{c.label} tried: {search_path(report, c) or 'nothing'}" for c in report.configs]


_GROUPS = {"bracket": "", "bisect": "", "repeat": "repeats ", "gallop": "moved "}


def search_path(report: CapacityReport, c: ConfigCapacity) -> str:
    """Every load in the order it was run; ``|`` where the search turned to the boundary's
    repeats or moved on from a side whose runs disagreed."""
    words: list[str] = []
    group = ""
    for p in c.probes:
        name = _GROUPS.get(p.phase, p.phase + " ")
        if words and name != group:
            words.append("|")
        words.append(("" if name == group else name) + load_text(report, p.load))
        words[-1] += "+" if p.ok else "-"
        group = name
    return " ".join(words)


def headline(report: CapacityReport, pick: ConfigCapacity) -> str:
    """``c=37 users per replica at P99 TTFT <= 2 s; 28 for the defaults: 1.3x``."""
    base = report.baseline()
    trial = f" (trial {pick.trial})" if pick.trial is not None else ""
    text = f"{pick.label} pick{trial}: {_amount(report, pick)}"
    if base is not None and base is not pick and base.capacity is not None:
        times = ratio(pick, base)
        text += f"; {load_text(report, base.capacity)} for the defaults"
        if times is not None:
            text += f": {'at least ' if pick.above is None else ''}{times:.2g}x"
    return text


def _amount(report: CapacityReport, c: ConfigCapacity) -> str:
    if c.capacity is None:
        return "not measured"
    per = "users per replica" if report.mode == CONCURRENCY else "req/s per replica"
    amount = f"{'c' if report.mode == CONCURRENCY else 'rate'}={load_text(report, c.capacity)}"
    held, runs = c.held(c.capacity)
    if c.above is None:
        return f"{amount} {per} or more (held {held} of {runs} runs at the most searched)"
    kept, tried = c.held(c.above)
    at = f"{load_text(report, c.above)} broke {tried - kept} of {tried}"
    return f"{amount} {per} at {bound_text(report, c)} (held {held} of {runs} runs, {at})"


def replicas_line(report: CapacityReport, demand: float) -> str:
    """How many replicas each config needs for ``demand`` users (or req/s)."""
    cells = []
    for c in report.configs:
        n = replicas(demand, c.capacity)
        if c.capacity is None:
            cells.append(f"{c.label} not measured")
        else:
            cells.append(f"{c.label} {n}" if n is not None else f"{c.label}: no count serves it")
    return f"replicas for {load_text(report, demand)} {report.unit}: " + ", ".join(cells)
