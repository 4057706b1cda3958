"""Running a pasted command in a real bash, with ``vllm`` and ``docker`` as recorders on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

RECORDER = """#!{python}
import json, os, sys
with open(os.environ["CAPTURE"], "w") as fh:
    json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}}, fh)
"""


def run_pasted(command: str, tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run ``command`` in bash; returns the argv and env the recorder got."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("vllm", "docker"):
        exe = bin_dir / name
        exe.write_text(RECORDER.format(python=sys.executable))
        exe.chmod(0o755)
    capture = tmp_path / "capture.json"
    full = {**os.environ, **env, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CAPTURE": str(capture)}
    subprocess.run(["bash", "-c", command], env=full, check=True, timeout=30)
    return dict(json.loads(capture.read_text()))
