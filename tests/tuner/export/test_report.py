"""report.html: self-contained, one Pareto plot per tier, rendered by a real headless browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.tuner.export.conftest import TIERS, build_study
from tuner.export import export_study

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _report(results: Path) -> str:
    export_study("hand", None, None, results)
    return (results / "hand" / "report.html").read_text()


def test_report_is_self_contained(hand_results: Path) -> None:
    html = _report(hand_results)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert len(html) < 1_000_000


def test_one_plot_per_tier_with_front_baseline_and_recommendation(hand_results: Path) -> None:
    html = _report(hand_results)
    for c in TIERS:
        svg = re.search(rf'<svg class="pareto" id="pareto-c{c}".*?</svg>', html, flags=re.S)
        assert svg is not None, f"no plot for c{c}"
        text = svg.group(0)
        marks = re.findall(r'<g data-trial="(\d+)">', text)
        assert int(re.search(r'data-points="(\d+)"', text).group(1)) == len(marks) > 0  # type: ignore[union-attr]
        assert text.count('class="recommended"') == 1 and text.count('class="baseline"') == 1
        assert "front-point" in text or text.count('class="recommended"') == 1
    for heading in ("Best vs baseline", "Pareto front", "Which parameters mattered", "Why trials"):
        assert heading in html


def test_every_p99_shown_says_it_is_the_maximum_of_its_8_requests(hand_results: Path) -> None:
    html = _report(hand_results)
    versus = re.search(r"<h3>Best vs baseline</h3>.*?</table>", html, flags=re.S)
    assert versus is not None
    rows = {m[0]: m[1] for m in re.findall(r"<tr><td>([^<]+)</td>(.*?)</tr>", versus.group(0))}
    for label in ("p99 TPOT (ms)", "p99 TTFT (ms)"):
        assert rows[label].count("(max of 8)") == 2, rows[label]  # baseline and pick
    assert "max of" not in rows["median TPOT (ms)"]
    front = re.search(r"<h3>Pareto front.*?</table>", html, flags=re.S)
    assert front is not None and "(max of 8)" in front.group(0)
    commands = (hand_results / "hand" / "commands.md").read_text()
    assert re.search(r"p99 TPOT [\d.]+ ms \(max of 8\)", commands)


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing: apt-get install -y chromium")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return exe


def _browse(exe: str, *args: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    return done.stdout


@pytest.mark.slow
def test_every_tier_plot_renders_in_headless_chromium(hand_results: Path, tmp_path: Path) -> None:
    exe = _chromium()
    _report(hand_results)
    page = (hand_results / "hand" / "report.html").as_uri()
    dom = _browse(exe, "--dump-dom", page)
    rendered = dict(
        re.findall(r'<svg class="pareto" id="pareto-(c\d+)"[^>]*data-rendered="(\w+)"', dom)
    )
    assert rendered == {f"c{c}": "yes" for c in TIERS}
    assert '<p class="warn">' not in dom  # the page's own warning about an empty plot
    shot = tmp_path / "report.png"
    _browse(exe, "--window-size=1200,2400", f"--screenshot={shot}", page)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_a_study_without_any_finished_trial_still_exports(tmp_path: Path) -> None:
    results = tmp_path / "results"
    url = build_study(results, name="empty")
    study = optuna.load_study(study_name="empty", storage=url)
    fresh = optuna.create_study(study_name="bare", storage=url, directions=["minimize"] * 2)
    for key, value in study.user_attrs.items():
        fresh.set_user_attr(key, value)
    fresh.add_trial(optuna.trial.create_trial(state=TrialState.FAIL, user_attrs={"failure": "x"}))
    result = export_study("bare", url, tmp_path / "out", results)
    recipe = yaml.safe_load((tmp_path / "out" / "recipe.yaml").read_text())
    assert recipe["presets"]["bare"]["points"] == {}
    assert recipe["presets"]["bare"]["no_feasible_config"] == [f"c{c}" for c in TIERS]
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.count('data-points="0"') == len(TIERS) and "No feasible config" in html
    assert "No feasible config at this tier" in (tmp_path / "out" / "commands.md").read_text()
    assert len(result.files) == 6 + len(TIERS)
