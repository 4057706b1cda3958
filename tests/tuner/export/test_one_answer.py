"""Every output file gives the same pick and the same verdict for every tier."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import yaml

from tuner.export import export_study
from tuner.export.show import show_study


def test_every_file_agrees_on_every_tiers_pick_and_verdict(hand_results: Path) -> None:
    result = export_study("hand", None, None, hand_results)
    out = result.out_dir
    recs = json.loads((out / "recommendations.json").read_text())["tiers"]
    answer = {f"c{r['concurrency']}": (r["trial"], r["verdict"]) for r in recs}
    assert answer and all(t is not None for t, _ in answer.values())

    preset = next(iter(yaml.safe_load((out / "recipe.yaml").read_text())["presets"].values()))
    assert {k: (p["trial"], p["verdict"]) for k, p in preset["points"].items()} == answer
    for key, point in preset["points"].items():  # the words a reader sees say the same
        trial, verdict = answer[key]
        assert point["description"].endswith(f"trial {trial} (verdict: {verdict}).")

    text = (out / "recommendations.txt").read_text()
    shown = show_study("hand", None, hand_results)
    html = unescape(re.sub(r"<[^>]+>", " ", (out / "report.html").read_text()))
    commands = (out / "commands.md").read_text()
    for tier, (trial, verdict) in answer.items():
        row = rf"^\s*{tier}\s+{trial}\s.*\s{re.escape(verdict)}\s"
        assert re.search(row, text, re.M), f"recommendations.txt disagrees at {tier}"
        assert re.search(row, shown, re.M), f"tune show disagrees at {tier}"
        assert re.search(rf"\s{tier}\s+{trial}\s.*?\s{re.escape(verdict)}\s", html)
        section = commands.split(f"## {tier}:", 1)[1].split("\n## ", 1)[0]
        assert f"Trial {trial}." in section and f"verdict: {verdict}." in section
