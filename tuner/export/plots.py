"""Inline SVG plots for the report: no scripts, no network, deterministic bytes.

Per tier, p99 TPOT (down is better) against output throughput (right is better): every measured
config, the Pareto front joined by a line, the baseline as a square and the recommendation as a
diamond. Each mark has a ``<title>`` so hovering names the trial.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from objectives.tails import tail_note
from tuner.score.tiers import Point, Tier

W, H = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 40, 50


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    value = start
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < hi:
        ticks.append(round(value, 10))
    return ticks


def _padded(values: Sequence[float]) -> tuple[float, float]:
    # A little room around the extremes, so marks at the edge (often the best) are not clipped.
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.04 or abs(hi) * 0.05 or 1.0
    return lo - pad, hi + pad


class _Scale:
    def __init__(self, ticks: Sequence[float], a: float, b: float) -> None:
        self.lo, self.hi, self.a, self.b = ticks[0], ticks[-1], a, b

    def __call__(self, v: float) -> float:
        span = (self.hi - self.lo) or 1.0
        return round(self.a + (v - self.lo) / span * (self.b - self.a), 2)


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:g}"


def pareto_svg(tier: Tier) -> str:
    x, y = tier.x.key, tier.y.key
    pts = [p for p in tier.points if x in p.metrics and y in p.metrics]
    c = tier.concurrency
    head = (
        f'<svg class="pareto" id="pareto-c{c}" data-points="{len(pts)}" '
        f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        f'role="img" aria-label="{_label(y)} against {_label(x)} at concurrency {c}">'
    )
    if not pts:
        msg = "no trial measured this tier"
        return f'{head}<text x="{W / 2}" y="{H / 2}" text-anchor="middle">{msg}</text></svg>'
    xt = nice_ticks(*_padded([p.metrics[x] for p in pts]))
    yt = nice_ticks(*_padded([p.metrics[y] for p in pts]))
    sx, sy = _Scale(xt, LEFT, W - RIGHT), _Scale(yt, H - BOTTOM, TOP)
    body = [_axes(xt, yt, sx, sy, tier), _front_line(tier, sx, sy), '<g class="marks">']
    body += [_mark(p, tier, sx, sy) for p in sorted(pts, key=lambda p: _layer(p, tier))]
    body += ["</g>", _legend()]
    return head + "".join(body) + "</svg>"


def _label(key: str) -> str:
    """``p99_tpot_ms`` -> ``p99 TPOT (ms)``, ``output_throughput`` -> ``output throughput
    (tok/s)``."""
    unit = " (ms)" if key.endswith("_ms") else " (tok/s)" if key.endswith("throughput") else ""
    words = key.removesuffix("_ms").split("_")
    return " ".join(w.upper() if w in {"tpot", "ttft", "itl", "e2el"} else w for w in words) + unit


def _axes(xt: Sequence[float], yt: Sequence[float], sx: _Scale, sy: _Scale, tier: Tier) -> str:
    out = ['<g class="axes" font-size="11" fill="#333">']
    for v in xt:
        x = sx(v)
        out.append(f'<line x1="{x}" y1="{TOP}" x2="{x}" y2="{H - BOTTOM}" stroke="#eee"/>')
        out.append(f'<text x="{x}" y="{H - BOTTOM + 16}" text-anchor="middle">{_fmt(v)}</text>')
    for v in yt:
        y = sy(v)
        out.append(f'<line x1="{LEFT}" y1="{y}" x2="{W - RIGHT}" y2="{y}" stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4}" text-anchor="end">{_fmt(v)}</text>')
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" '
        'fill="none" stroke="#999"/>'
    )
    out.append(
        f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 12}" text-anchor="middle" font-size="12">'
        f"{_label(tier.x.key)}, {'right' if tier.x.direction == 'maximize' else 'left'} is "
        "better</text>"
    )
    out.append(
        f'<text transform="translate(16 {(TOP + H - BOTTOM) / 2}) rotate(-90)" '
        'text-anchor="middle" font-size="12">'
        f"{_label(tier.y.key)}, down is better</text>"
    )
    return "".join(out) + "</g>"


def _front_line(tier: Tier, sx: _Scale, sy: _Scale) -> str:
    # The line joins the configs that may be deployed; lower-quality points stand apart.
    front = [p for p in tier.front_points() if not p.lower_quality]
    if len(front) < 2:
        return ""
    x, y = tier.x.key, tier.y.key
    xy = " ".join(f"{sx(p.metrics[x])},{sy(p.metrics[y])}" for p in front)
    return (
        f'<polyline class="front" points="{xy}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>'
    )


def _layer(p: Point, tier: Tier) -> tuple[int, int]:
    # Later marks are drawn on top: the recommendation must never hide under another point.
    rec = tier.recommended is not None and p.trial == tier.recommended.trial
    return (2 if rec else 1 if p.baseline else 0, p.trial)


def _mark(p: Point, tier: Tier, sx: _Scale, sy: _Scale) -> str:
    xk, yk = tier.x.key, tier.y.key
    x, y = sx(p.metrics[xk]), sy(p.metrics[yk])
    status = "" if p.feasible else f" (infeasible: {p.failure})"
    if p.feasible and not p.eligible:
        status = " (feasible, not eligible: held users or below the throughput floor)"
    if p.lower_quality:
        status = f" (lower quality, not eligible: {p.quality.words()})"
    note = tail_note(yk, p.metrics)
    rests = f" ({note})" if note else ""
    title = escape(
        f"trial {p.trial}: {_label(yk)} {p.metrics[yk]:.2f}{rests}, {_label(xk)} "
        f"{p.metrics[xk]:.1f}{status}"
    )
    rec = tier.recommended is not None and p.trial == tier.recommended.trial
    if rec:
        shape = _diamond(x, y, 9, 'fill="#ff7f0e" stroke="#000"', "recommended")
    elif p.baseline:
        shape = (
            f'<rect class="baseline" x="{x - 6}" y="{y - 6}" width="12" height="12" '
            'fill="none" stroke="#000" stroke-width="2"/>'
        )
    elif not p.feasible:
        shape = (
            f'<path class="infeasible" d="M{x - 4},{y - 4}L{x + 4},{y + 4}M{x - 4},{y + 4}'
            f'L{x + 4},{y - 4}" stroke="#d62728" stroke-width="1.5"/>'
        )
    elif p.lower_quality:
        shape = (
            f'<circle class="lower-quality" cx="{x}" cy="{y}" r="5" fill="none" '
            'stroke="#9467bd" stroke-width="2"/>'
        )
    elif p.trial in tier.front:
        shape = f'<circle class="front-point" cx="{x}" cy="{y}" r="5" fill="#1f77b4"/>'
    else:
        shape = f'<circle class="point" cx="{x}" cy="{y}" r="4" fill="#bbb"/>'
    return f'<g data-trial="{p.trial}"><title>{title}</title>{shape}</g>'


def _diamond(x: float, y: float, r: float, style: str, cls: str) -> str:
    d = f"M{x},{y - r}L{x + r},{y}L{x},{y + r}L{x - r},{y}Z"
    return f'<path class="{cls}" d="{d}" {style}/>'


def _legend() -> str:
    items = [
        '<circle cx="0" cy="0" r="4" fill="#bbb"/>',
        '<circle cx="0" cy="0" r="5" fill="#1f77b4"/>',
        '<rect x="-6" y="-6" width="12" height="12" fill="none" stroke="#000" stroke-width="2"/>',
        _diamond(0, 0, 8, 'fill="#ff7f0e" stroke="#000"', "legend"),
        '<path d="M-4,-4L4,4M-4,4L4,-4" stroke="#d62728" stroke-width="1.5"/>',
        '<circle cx="0" cy="0" r="5" fill="none" stroke="#9467bd" stroke-width="2"/>',
    ]
    names = ["trial", "Pareto front", "baseline", "recommended", "infeasible", "lower quality"]
    out = ['<g class="legend" font-size="11">']
    for i, (mark, name) in enumerate(zip(items, names, strict=True)):
        x = LEFT + 10 + i * 92
        out.append(f'<g transform="translate({x} 18)">{mark}<text x="12" y="4">{name}</text></g>')
    return "".join(out) + "</g>"


def bars_html(values: dict[str, float]) -> str:
    """Importance as horizontal bars (HTML, so long parameter names wrap)."""
    rows = []
    for name, v in values.items():
        pct = max(0.0, min(1.0, v)) * 100
        rows.append(
            f'<tr><td>{escape(name)}</td><td class="bar"><span style="width:{pct:.1f}%"></span>'
            f"</td><td>{v:.3f}</td></tr>"
        )
    return '<table class="importance">' + "".join(rows) + "</table>"
