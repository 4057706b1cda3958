"""The report's "Where the hours went" section, rendered from ``tuner.export.hours``.

Its own small table writer: ``report.py`` imports this module, so this one cannot import the
report's helpers back. The page's CSS (``report.CSS``) styles both alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from tuner.export.hours import (
    CacheEffect,
    StudyHours,
    clock_words,
    span,
    startup_words,
    study_hours,
)
from tuner.storage.study_data import StudyData


def hours_html(data: StudyData) -> str:
    """The section for one study: each part's hours and share, then start-up and its cache."""
    h = study_hours(data.trials, data.tiers, data.target_kind == "sim")
    head = '<h2 id="hours">Where the hours went</h2>'
    if not h.launches:
        return head + '<p class="note">No launch recorded its times (a study older than that).</p>'
    return head + _intro(h) + _parts(h) + _cache(h.cache)


def _intro(h: StudyHours) -> str:
    words = (
        f"{span(h.total_s)} of engine time over {h.launches} launches, {clock_words(h)}. "
        "A confirmation launch counts whole under confirmations, and a launch that broke down "
        "(refused, out of memory, crashed, infrastructure, interrupted) under failures."
    )
    if h.untimed:
        words += f" {h.untimed} earlier launches recorded no times and are left out."
    return f'<p class="note">{escape(words)}</p>'


def _parts(h: StudyHours) -> str:
    rows: list[Sequence[str]] = []
    for name, seconds in h.parts():
        detail = ""
        if name == "tiers":
            detail = ", ".join(f"c{c} {span(s)}" for c, s in h.tiers_s.items())
        rows.append((escape(name), _num(span(seconds)), _bar(h.share(seconds)), escape(detail)))
    rows.append(("<b>total</b>", _num(span(h.total_s)), _bar(1.0), ""))
    return _table(("part", "time", "share", "per tier"), rows)


def _cache(c: CacheEffect | None) -> str:
    head = "<h3>Start-up and the engine caches</h3>"
    if c is None:
        return head + '<p class="note">No launch got ready.</p>'
    words = startup_words(c)
    html = head + f"<p>{escape(words[:1].upper() + words[1:])}.</p>"
    if not c.keys:
        note = (
            "The engines' logs named no compile-cache entry (an eager engine, or one that does "
            "not log it), so only the first launch is told from the later ones."
        )
        return html + f'<p class="note">{note}</p>'
    # Keys launched once say nothing of the cache; a long study has dozens of them.
    repeated = [k for k in c.keys if k.later_s is not None]
    once = len(c.keys) - len(repeated)
    if once:
        html += f'<p class="note">{once} compile keys were launched once (a cold start each).</p>'
    if not repeated:
        return html
    rows = [
        (
            f"<code>{escape(k.key)}</code>",
            _num(str(k.launches)),
            _num(span(k.first_s)),
            _num(span(k.later_s or 0.0)),
        )
        for k in repeated
    ]
    return html + _table(("compile key", "launches", "first start-up", "later (mean)"), rows)


def _bar(share: float) -> str:
    width = max(0.0, min(share, 1.0)) * 200
    bar = f'<span style="display:inline-block;width:{width:.0f}px;height:10px;background:#1f77b4">'
    return f"<td>{bar}</span> {share:.0%}</td>"


def _num(text: str) -> str:
    return f'<td class="num">{escape(text)}</td>'


def _table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Rows of ready cells: a ``<td>`` already, or HTML to wrap in one."""
    th = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"
    body = "".join("<tr>" + "".join(map(_td, row)) + "</tr>" for row in rows)
    return f'<div class="scroll"><table>{th}{body}</table></div>'


def _td(cell: str) -> str:
    return cell if cell.startswith("<td") else f"<td>{cell}</td>"
