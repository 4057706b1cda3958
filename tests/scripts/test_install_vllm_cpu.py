"""scripts/install_vllm_cpu.sh reuses a cached venv, and one copied from another checkout
starts from where it now lies."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_vllm_cpu.sh"


def cached_venv(cache: Path, made_at: Path) -> Path:
    """A finished install's venv (its stamp set) whose scripts name ``made_at``."""
    venv = cache / "0.32.0" / "venv"
    (venv / "bin" / "__pycache__").mkdir(parents=True)
    for name in ("vllm", "pip"):
        script = venv / "bin" / name
        script.write_text(f"#!{made_at}/bin/python3\nprint('{name}')\n")
        script.chmod(0o755)
    (venv / "bin" / "activate").write_text("# no shebang\n")
    (venv / ".tune-installed").touch()
    return venv


def install(cache: Path) -> str:
    env = {**os.environ, "VLLM_CACHE_DIR": str(cache), "VLLM_CPU_VERSION": "0.32.0"}
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_venv_copied_from_another_checkout_names_its_new_place(tmp_path: Path) -> None:
    venv = cached_venv(tmp_path / "cache", tmp_path / "elsewhere" / "venv")
    assert install(tmp_path / "cache") == str(venv)
    for name in ("vllm", "pip"):
        first = (venv / "bin" / name).read_text().splitlines()[0]
        assert first == f"#!{venv}/bin/python3"
    assert (venv / "bin" / "activate").read_text() == "# no shebang\n"


def test_a_venv_in_its_own_place_is_left_as_it_is(tmp_path: Path) -> None:
    venv = tmp_path / "cache" / "0.32.0" / "venv"
    cached_venv(tmp_path / "cache", venv)
    before = (venv / "bin" / "vllm").stat().st_mtime_ns
    assert install(tmp_path / "cache") == str(venv)
    assert (venv / "bin" / "vllm").stat().st_mtime_ns == before
