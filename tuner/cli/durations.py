"""Durations as people write them on a command line: 90, 90s, 30m, 2h, 1h30m."""

from __future__ import annotations

import re

from tuner.errors import TunerError

_PART = re.compile(r"(\d+(?:\.\d+)?)([hms]?)")
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "": 1.0}


def parse_duration(text: str) -> float:
    """Seconds in ``text``; raises ``TunerError`` naming the bad value."""
    compact = text.strip().lower().replace(" ", "")
    pos, total = 0, 0.0
    while pos < len(compact):
        match = _PART.match(compact, pos)
        if match is None:
            break
        total += float(match[1]) * _SECONDS[match[2]]
        pos = match.end()
    if not compact or pos != len(compact) or total <= 0:
        raise TunerError(
            f"--timeout: cannot read duration {text!r} (examples: 90s, 30m, 2h, 1h30m)"
        )
    return total
