"""The machine's refusals are the user's to fix: a full disk, a read-only folder, a study.db
that is not a database, a ``--json`` folder that does not exist. Each is one line naming the
path, at once: no traceback, no half-hour wait as an unreachable storage.

The full disk and the read-only folder are real: a 1 MiB tmpfs, filled, and a tmpfs mounted
read-only (root only; skipped, with the reason, where mounting is not allowed).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.hostile import Hostile, serving
from tests.faults.procs import REPO, finish, tune
from tests.tuner.export.conftest import hand_results, hand_study_dir  # noqa: F401 (fixtures)
from tuner.cli import main


def _mount(folder: Path, *options: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    cmd = ["mount", "-t", "tmpfs", "-o", ",".join(["size=1m", *options]), "tmpfs", str(folder)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB file system with a few KiB left: room to start, none to record a study."""
    folder = tmp_path / "full"
    _mount(folder)
    try:
        with (folder / "filler").open("wb") as fh:
            fh.write(b"\0" * (1024 * 1024 - 16 * 1024))
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "ro"
    _mount(folder, "ro")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def one_line(out: str) -> str:
    assert "Traceback" not in out, out
    lines = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, out
    return lines[0]


def run_into(results: Path, space_file: Path) -> tuple[int, str, float]:
    started = time.monotonic()
    args = ["run", "--space", str(space_file), "--trials", "2", "--confirm", "0"]
    proc = tune(*args, "--results-dir", str(results), cwd=REPO)
    try:
        code, out = finish(proc, timeout_s=120)
    finally:
        proc.kill()
    return code, out, time.monotonic() - started


def test_a_full_disk_is_one_line_at_once(full_disk: Path, space_file: Path) -> None:
    # Before: retried for 30 minutes as "storage unreachable", then a traceback.
    code, out, took = run_into(full_disk / "results", space_file)
    assert code == 2
    line = one_line(out)
    assert str(full_disk) in line and "the disk is full" in line
    assert "storage unreachable" not in out
    assert took < 60


def test_a_read_only_results_folder_is_one_line(read_only: Path, space_file: Path) -> None:
    code, out, _ = run_into(read_only / "results", space_file)
    assert code == 2
    line = one_line(out)
    assert str(read_only / "results") in line and "read-only" in line


def test_export_into_a_read_only_folder_is_one_line(
    read_only: Path,
    hand_results: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "export",
        "--study",
        "hand",
        "--results-dir",
        str(hand_results),
        "--out",
        str(read_only),
    ]
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert str(read_only) in line and "read-only" in line


@pytest.mark.parametrize("damage", ["truncated", "random"])
def test_a_damaged_study_db_is_one_line(
    damage: str,
    hand_results: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = hand_results / "hand" / "study.db"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3] if damage == "truncated" else os.urandom(len(data)))
    assert main(["show", "--study", "hand", "--results-dir", str(hand_results)]) == 2
    line = one_line(capsys.readouterr().err)
    assert str(db) in line and "SQLite database" in line


def test_bench_json_into_a_missing_folder_is_refused_before_the_benchmark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "nowhere" / "bench.json"
    with serving(Hostile()) as url:
        argv = ["bench", "--url", url, "--model", "m", "--concurrency", "1", "--warmup", "0"]
        argv += ["--num-prompts", "2", "--random-input-len", "8", "--json", str(out)]
        assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert line == f"error: --json {out}: the folder {out.parent} does not exist"
