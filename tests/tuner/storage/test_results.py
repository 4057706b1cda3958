"""Crash-safe writes into the results folder."""

from __future__ import annotations

import os
from pathlib import Path

from tuner.storage.results import write_atomic, write_json


def test_write_atomic_replaces_whole_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "a.json"
    write_json(target, {"x": 1})
    write_json(target, {"x": 2})
    assert target.read_text().strip().endswith("}") and '"x": 2' in target.read_text()
    assert [p.name for p in target.parent.iterdir()] == ["a.json"]


def test_written_files_are_readable_like_ordinary_files(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "report.html", "<html></html>")
    finally:
        os.umask(old)
    # The mode follows the umask of the process that imported the module (022 here and in CI).
    assert (tmp_path / "report.html").stat().st_mode & 0o777 in {0o644, 0o664}
