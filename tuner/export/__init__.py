"""Every result file of a study, rebuilt from its storage alone: ``export_study``.

Writes into the study's results folder (or ``out_dir``): ``recipe.yaml``, ``commands.md``,
``trials.csv``, ``pareto_c<N>.csv``, ``recommendations.txt`` / ``.json`` and ``report.html``.
It is their one writer: ``tune export`` calls it, and so does ``tune run`` (the tables after
every trial, ``TABLES``, and every file at the end) and ``tune capacity``. The same storage
always gives the same bytes, so exporting again is harmless; every file is scanned for secret
values before it stays. The study folder's ``capacity.json`` (``tune capacity``), when
present, joins the recipe and the report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import optuna

from tuner.export.build import Export, TierExport, build_export
from tuner.export.commands import commands_markdown
from tuner.export.recipe import recipe_yaml
from tuner.export.recommend_table import format_recommendations, recommendations_json
from tuner.export.report import report_html
from tuner.export.tables import pareto_frame, trials_frame
from tuner.storage.capacity import read_capacity
from tuner.storage.results import write_atomic
from tuner.storage.study_data import load_study_data, study_data

# What a run refreshes after every trial, so that a long study shows its standing as it goes.
TABLES = ("trials.csv", "recommendations.txt", "recommendations.json")


@dataclass
class ExportResult:
    """Where an export wrote, and what it recommends."""

    out_dir: Path
    files: list[Path] = field(default_factory=list)
    export: Export | None = None


def export_study(
    name: str,
    storage: str | None = None,
    out_dir: Path | None = None,
    results_dir: Path = Path("results"),
    study: optuna.Study | None = None,
    only: Collection[str] | None = None,
) -> ExportResult:
    """Export study ``name`` (found in ``storage``, else ``results_dir/<name>/study.db``).

    ``study`` is the study already open at ``storage`` (a run's own), read instead of opened
    again; ``only`` names the files to write (default: every one)."""
    with _quiet_optuna():
        if study is None:
            data = load_study_data(name, storage, results_dir)
        else:
            data = study_data(study, storage or f"sqlite:///{results_dir / name / 'study.db'}")
        export = build_export(data, read_capacity(results_dir / name))
        shown = renderers(export).items()
        files = {f: render() for f, render in shown if only is None or f in only}
    out = out_dir or results_dir / name
    for fname, text in files.items():
        export.redactor.check(out / fname, text)  # before anything is written
    for fname, text in files.items():
        write_atomic(out / fname, text)
    return ExportResult(out, [out / f for f in files], export)


def renderers(export: Export) -> dict[str, Callable[[], str]]:
    """Every result file's name, and how its text is rendered from ``export``."""
    data, recs = export.data, export.recommendations
    files: dict[str, Callable[[], str]] = {
        "recipe.yaml": lambda: recipe_yaml(export),
        "commands.md": lambda: commands_markdown(export),
        "trials.csv": lambda: trials_frame(export).to_csv(index=False),
        "recommendations.txt": lambda: format_recommendations(recs, data.objective) + "\n",
        "recommendations.json": lambda: recommendations_json(data, recs),
        "report.html": lambda: report_html(export),
    }
    for t in export.tiers:
        files[f"pareto_c{t.concurrency}.csv"] = partial(_pareto_csv, t)
    return files


def _pareto_csv(t: TierExport) -> str:
    return pareto_frame(t).to_csv(index=False)


@contextmanager
def _quiet_optuna() -> Iterator[None]:
    # Importance evaluation creates throwaway in-memory studies; their INFO lines are noise.
    logger = logging.getLogger("optuna")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


__all__ = ["TABLES", "ExportResult", "export_study"]
