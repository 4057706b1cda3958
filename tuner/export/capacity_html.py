"""The report's capacity section: users per replica within the SLO, from ``capacity.json``.

Empty when ``tune capacity`` has not run for the study. A config it measured that no tier
recommends any more (the study ran on since) is marked, not dropped: the figure is still what
that launch served.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from tuner.export.build import Export, TierExport
from tuner.export.capacity_text import (
    bound_text,
    headline,
    load_text,
    metric_label,
    search_path,
    shown_metric,
    slo_label,
    spread_text,
)
from tuner.storage.capacity import CONCURRENCY, CapacityReport, ConfigCapacity


def capacity_section(export: Export) -> str:
    report = export.capacity
    if report is None:
        return ""
    slos = " and ".join(slo_label(s) for s in report.slos)
    what = "Users" if report.mode == CONCURRENCY else "Requests per second"
    lines = "".join(f"<li>{escape(headline(report, c))}</li>" for c in report.picks())
    return (
        f'<h2 id="capacity">{what} per replica within {escape(slos)}</h2>'
        f"<ul>{lines}</ul>" + _table(report, export) + f'<p class="note">{escape(_how(report))}</p>'
    )


def _how(report: CapacityReport) -> str:
    return (
        f"Measured by tune capacity on the {report.measured_on} launcher after "
        f"{report.trials} trials, under the SLOs of tier c{report.slo_tier}: each config "
        "launched once, its load doubled until an SLO broke, then bisected between the last "
        f"load that held and the first that broke (at most {load_text(report, report.max_load)}"
        f" {report.unit}, {report.max_steps} probes); then each side of the boundary measured "
        f"{report.repeats} times, the boundary moved a step while most runs of a side disagreed "
        "with it: the answer held in most of its runs, the next step broke in most of its. "
        "+ held, - broke."
    )


def _table(report: CapacityReport, export: Export) -> str:
    head = (
        "config",
        "trial",
        f"{report.unit} per replica",
        "breaks at",
        "bound by",
        "at the answer: median [min - max]",
        "at the break",
        "loads tried",
    )
    rows = [_row(report, c, _note(c, export)) for c in report.configs]
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="capacity"><tr>{th}</tr>{body}</table></div>'


def _row(report: CapacityReport, c: ConfigCapacity, note: str) -> Sequence[str]:
    metric = shown_metric(report, c)
    return (
        c.label + note,
        "-" if c.trial is None else str(c.trial),
        load_text(report, c.capacity),
        load_text(report, c.above),
        c.failure if c.capacity is None and c.failure else bound_text(report, c),
        _spread(c, c.capacity, metric, True),
        _spread(c, c.above, metric, False),
        search_path(report, c),
    )


def _spread(c: ConfigCapacity, load: float | None, metric: str, held: bool) -> str:
    text = spread_text(c, load, metric, held)
    return text if text == "-" else f"{metric_label(metric)} {text}"


def _note(c: ConfigCapacity, export: Export) -> str:
    now = [t.concurrency for t in export.tiers if _picks(t, c)]
    if c.baseline or now == c.tiers:
        return ""
    return " (now " + (",".join(f"c{n}" for n in now) or "no tier") + "'s pick)"


def _picks(t: TierExport, c: ConfigCapacity) -> bool:
    rec = t.tier.recommended
    return rec is not None and rec.params == c.params
