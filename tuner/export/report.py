"""``report.html``: one self-contained page (inline CSS, SVG and a few lines of JS, no network).

Sections: the study at a glance, the searched space, the recommendation per tier, then per
tier the Pareto plot, the best-vs-baseline table, the front and which parameters mattered, and
last why trials failed. The script only checks that each plot laid out (for headless tests and
a visible warning); the page reads the same without it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from objectives.tails import tail_note
from tuner.export.build import Export, TierExport
from tuner.export.capacity_html import capacity_section
from tuner.export.commands import serve_command
from tuner.export.docker_run import image_of
from tuner.export.importance import METHOD
from tuner.export.plots import bars_html, pareto_svg
from tuner.export.recommend_table import agreement_cell
from tuner.export.report_hours import hours_html
from tuner.score.tiers import FIGURE_KEYS, Point
from tuner.space.params import Parameter
from tuner.storage.urls import redact

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}h3{margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f4f4f4}td.num{text-align:right}
.better{color:#17803d}.worse{color:#b3261e}.note{color:#666}
pre{background:#f6f8fa;padding:.8em;overflow-x:auto;font-size:12px}
table.importance td.bar{width:300px}table.importance span{display:block;height:10px;
background:#1f77b4}.warn{background:#fde7e9;padding:.5em}.scroll{overflow-x:auto}
"""
# Marks each plot that laid out with a non-empty box; a warning names any that did not.
SCRIPT = """
addEventListener('load',function(){var bad=[];document.querySelectorAll('svg.pareto')
.forEach(function(s){var g=s.querySelector('g.marks'),b=g?g.getBBox():null,ok=!!b&&b.width>0;
s.setAttribute('data-rendered',ok||s.dataset.points==='0'?'yes':'no');if(!ok&&s.dataset.points
!=='0')bad.push(s.id)});if(bad.length){var p=document.createElement('p');p.className='warn';
p.textContent='plots that did not render: '+bad.join(', ');document.body.prepend(p)}});
"""
LABELS = {
    "median_tpot_ms": "median TPOT (ms)",
    "p99_tpot_ms": "p99 TPOT (ms)",
    "p99_itl_ms": "p99 ITL (ms)",
    "max_itl_ms": "longest gap (ms)",
    "long_gaps": "gaps over the long-gap threshold",
    "p99_ttft_ms": "p99 TTFT (ms)",
    "output_throughput": "output throughput (tok/s)",
}


def _table(head: Sequence[str] | None, rows: Iterable[Sequence[Any]]) -> str:
    th = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>" if head else ""
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f'<div class="scroll"><table>{th}{body}</table></div>'  # wide tables scroll alone


def _cell(v: Any) -> str:
    if isinstance(v, _Raw):
        return f'<td class="{v.cls}">{v.html}</td>' if v.cls else f"<td>{v.html}</td>"
    if isinstance(v, float):
        return f'<td class="num">{v:,.2f}</td>'
    if isinstance(v, int) and not isinstance(v, bool):
        return f'<td class="num">{v}</td>'
    return f"<td>{escape('-' if v is None else str(v))}</td>"


class _Raw:
    def __init__(self, html: str, cls: str = "") -> None:
        self.html, self.cls = html, cls


def figure(key: str, metrics: dict[str, float]) -> Any:
    """A figure's cell; a percentile says what it rests on, ``12.30 (max of 20)``."""
    value, note = metrics.get(key), tail_note(key, metrics)
    if value is None or note is None:
        return value
    return _Raw(f'{value:,.2f} <span class="note">({escape(note)})</span>', "num")


def gain_html(gain: float | None) -> _Raw:
    if gain is None:
        return _Raw("-")
    cls, word = ("better", "better") if gain >= 0 else ("worse", "worse")
    return _Raw(f'<span class="{cls}">{abs(gain) * 100:.1f}% {word}</span>')


def report_html(export: Export) -> str:
    data = export.data
    parts = [
        f"<h1>Tuning study <code>{escape(data.name)}</code></h1>",
        _summary(export),
        "<h2>Recommended config per concurrency tier</h2>",
        _overview(export),
        "<p>Ready-to-paste <code>vllm serve</code> and <code>docker run</code> commands per "
        "tier: <code>commands.md</code>; the same configs as a recipe preset: "
        "<code>recipe.yaml</code>.</p>",
        capacity_section(export),
        _space(export),
        *(_tier(t, export) for t in export.tiers),
        _failures(export),
        hours_html(export.data),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>tune: {escape(data.name)}</title><style>{CSS}</style></head><body>\n"
        + "\n".join(parts)
        + f"\n<script>{SCRIPT}</script></body></html>\n"
    )


def _summary(export: Export) -> str:
    data, n = export.data, export.data.counts()
    engine = data.space.engine
    wall = data.wall_time_s()
    rows = [
        ("space", data.space.description or data.record.space_path),
        ("hardware", data.space.hardware or "-"),
        ("engine", f"{engine.name} {engine.version}, model {engine.model}"),
        ("image", image_of(data.space)),
        ("measured on", _measured_on(export)),
        (
            "objective",
            f"{data.objective.name}: {data.objective.description} ({data.objective.direction})",
        ),
        ("tiers", ", ".join(f"c{t}" for t in data.tiers)),
        (
            "trials",
            f"{n['total']} in all: {n['feasible']} feasible at every tier, "
            f"{n['infeasible']} infeasible at one tier or more, "
            f"{n['failed']} failed (infrastructure or interrupted), {n['unfinished']} unfinished",
        ),
        ("wall time", f"{wall / 60:.1f} min (first trial start to last trial end)"),
        ("created", data.created()),
        ("storage", export.redactor.scrub(redact(data.storage))),
    ]
    return "<h2>Summary</h2>" + _table(None, rows)


def _measured_on(export: Export) -> str:
    kind = export.data.target_kind
    if kind == "sim":
        return "the simulated engine (figures are the simulator's; re-measure on the hardware)"
    return f"{kind} launcher"


def _space(export: Export) -> str:
    space = export.data.space
    rows = []
    for name, p in space.parameters.items():
        values = ", ".join(map(str, p.choices)) if p.choices else _range(p.low, p.high, p.log)
        rows.append((name, _binds(p), values, str(p.default)))
    html = "<h2>Search space</h2>" + _table(("parameter", "sets", "values", "default"), rows)
    if space.rules:
        html += "<p>Rules: " + "; ".join(f"<code>{escape(r)}</code>" for r in space.rules) + "</p>"
    if space.slos:
        slos = "; ".join(escape(s.model_dump_json(exclude_none=True)) for s in space.slos)
        html += f"<p>SLOs: {slos}</p>"
    return html


def _binds(p: Parameter) -> str:
    if p.json_key is not None:
        return f"{p.json_key.flag} (JSON key {p.json_key.key})"
    if p.knob is not None:
        return f"knob {p.knob} (flag or env, as the engine version reads it)"
    return str(p.flag or (f"env {p.env}" if p.env else "-"))


def _range(low: Any, high: Any, log: bool) -> str:
    def num(v: Any) -> str:
        return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)

    return f"{num(low)} .. {num(high)}" + (" (log scale)" if log else "")


def _overview(export: Export) -> str:
    """One row per tier: the pick, its objective beside the baseline's, the gain with the
    verdict every other output gives (a gain is read with it, never coloured alone), and the
    pick's smoothness and P99 TTFT beside it."""
    obj = export.data.objective
    rows: list[tuple[Any, ...]] = []
    for t in export.tiers:
        rec, base = t.tier.recommended, t.tier.baseline
        if rec is None:
            rows.append((f"c{t.concurrency}", "none feasible", *[None] * 9, "-"))
            continue
        gain = None if t.tier.gain is None else f"{t.tier.gain * 100:+.1f}%"
        smooth = [figure(k, rec.metrics) for k in ("p99_itl_ms", "max_itl_ms", "p99_ttft_ms")]
        rows.append(
            (
                f"c{t.concurrency}",
                rec.trial,
                figure(obj.key, rec.metrics),
                figure(obj.key, base.metrics) if base else None,
                gain,
                t.tier.verdict,
                *smooth,
                rec.confirmations,
                rec.spread * 100,
                agreement_cell(rec.quality.to_json()),
            )
        )
    head = (
        "tier",
        "trial",
        f"{obj.name} ({obj.unit})",
        "baseline",
        "gain",
        "verdict",
        LABELS["p99_itl_ms"],
        LABELS["max_itl_ms"],
        LABELS["p99_ttft_ms"],
        "measurements",
        "spread %",
        "answers as the baseline's",
    )
    return _table(head, rows)


def _tier(t: TierExport, export: Export) -> str:
    tier = t.tier
    parts = [f'<h2 id="c{t.concurrency}">Concurrency {t.concurrency}</h2>', pareto_svg(tier)]
    if tier.choice:
        parts.append(f'<p class="choice">{escape(tier.choice)}</p>')
    parts += ["<h3>Best vs baseline</h3>", _versus(t, export)]
    parts += ["<h3>Pareto front (p99 TPOT vs output throughput)</h3>", _front(t)]
    parts += ["<h3>Which parameters mattered</h3>", _importance(t, export)]
    if t.launch is not None:
        parts += ["<h3>Command</h3>", f"<pre>{escape(serve_command(t.launch))}</pre>"]
    return '<section class="tier">' + "\n".join(parts) + "</section>"


def _versus(t: TierExport, export: Export) -> str:
    rec, base = t.tier.recommended, t.tier.baseline
    if rec is None:
        return '<p class="note">No feasible config at this tier.</p>'
    rows = []
    for key in FIGURE_KEYS:
        mine, ref = rec.metrics.get(key), base.metrics.get(key) if base else None
        change = None
        if mine is not None and ref:
            change = (mine - ref) / ref if key == "output_throughput" else (ref - mine) / ref
        shown = figure(key, base.metrics) if base else None
        rows.append((LABELS[key], shown, figure(key, rec.metrics), gain_html(change)))
    rows.append(("answers as the baseline's", "-", rec.quality.words(), _Raw("")))
    head = (
        "metric",
        f"baseline (trial {base.trial})" if base else "baseline",
        f"recommended (trial {rec.trial})",
        "change",
    )
    return _table(head, rows) + _knobs(export, t.concurrency)


def _knobs(export: Export, concurrency: int) -> str:
    """Each knob the pick changes from the engine's default, with how its effect was measured."""
    rec = export.recommendation(concurrency)
    rows = [(f"{k}={n['value']}", n["words"]) for k, n in (rec.knobs if rec else {}).items()]
    head = ("changed from the engine's default", "how its effect at this tier was measured")
    return _table(head, rows) if rows else "<p>Every knob at the engine's default.</p>"


def _front(t: TierExport) -> str:
    points: list[Point] = t.tier.front_points()
    if not points:
        return '<p class="note">No feasible trial measured this tier.</p>'
    names = list(dict.fromkeys(k for p in points for k in p.params))
    head = ["trial", *[LABELS[k] for k in FIGURE_KEYS], "answers", *names]
    rows = [
        [
            _trial_label(p, t),
            *[figure(k, p.metrics) for k in FIGURE_KEYS],
            agreement_cell(p.quality.to_json()),
            *[str(p.params.get(n)) for n in names],
        ]
        for p in points
    ]
    return _table(head, rows)


def _trial_label(p: Point, t: TierExport) -> str:
    tags = [
        tag
        for tag, on in (
            ("recommended", t.tier.recommended is p),
            ("baseline", p.baseline),
            ("lower quality", p.lower_quality),
        )
        if on
    ]
    return f"{p.trial} ({', '.join(tags)})" if tags else str(p.trial)


def _importance(t: TierExport, export: Export) -> str:
    imp = t.importance
    if not imp.values:
        return f'<p class="note">Not computed: {escape(imp.note)}.</p>'
    what = METHOD.format(
        top=imp.quantile, n=imp.trials, tier=t.concurrency, objective=export.data.objective.name
    )
    idle = f" Cannot act at this tier: {', '.join(imp.idle)}." if imp.idle else ""
    return f'<p class="note">{escape(what)}.{escape(idle)}</p>' + bars_html(imp.values)


def _failures(export: Export) -> str:
    if not export.failures:
        return "<h2>Failures</h2><p>Every trial was feasible.</p>"
    counts = _table(("kind", "trials"), export.failure_counts().items())
    rows = [(f.trial, f.state, f.kind, f.reason) for f in export.failures]
    return (
        "<h2>Why trials failed</h2>" + counts + _table(("trial", "state", "kind", "reason"), rows)
    )
