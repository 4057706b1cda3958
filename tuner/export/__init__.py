"""``tune export``: what a study recommends, rebuilt from its storage alone.

Writes into the study's results folder (or ``out_dir``): ``recipe.yaml``, ``commands.md``,
``trials.csv``, ``pareto_c<N>.csv`` and ``report.html``. The same storage always gives the same
bytes, so exporting again is harmless; every file is scanned for secret values before it stays.
The study folder's ``capacity.json`` (``tune capacity``), when present, joins the recipe and
the report.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tuner.export.build import Export, build_export
from tuner.export.commands import commands_markdown
from tuner.export.recipe import recipe_yaml
from tuner.export.report import report_html
from tuner.export.tables import pareto_frame, trials_frame
from tuner.storage.capacity import read_capacity
from tuner.storage.results import write_atomic
from tuner.storage.study_data import load_study_data


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
) -> ExportResult:
    """Export study ``name`` (found in ``storage``, else ``results_dir/<name>/study.db``)."""
    with _quiet_optuna():
        data = load_study_data(name, storage, results_dir)
        export = build_export(data, read_capacity(results_dir / name))
    out = out_dir or results_dir / name
    files = {
        "recipe.yaml": recipe_yaml(export),
        "commands.md": commands_markdown(export),
        "trials.csv": trials_frame(export).to_csv(index=False),
        "report.html": report_html(export),
    }
    for t in export.tiers:
        files[f"pareto_c{t.concurrency}.csv"] = pareto_frame(t).to_csv(index=False)
    for fname, text in files.items():
        export.redactor.check(out / fname, text)  # before anything is written
    for fname, text in files.items():
        write_atomic(out / fname, text)
    return ExportResult(out, [out / f for f in files], export)


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


__all__ = ["ExportResult", "export_study"]
