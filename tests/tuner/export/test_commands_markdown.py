"""commands.md quotes the space's own words: they are text, never markdown or HTML."""

from __future__ import annotations

from pathlib import Path

from tests.tuner.export.conftest import build_study, space_dict
from tuner.export import export_study

HARDWARE = "4x H200\n# Injected heading <script>alert(1)</script> *bold* [link](http://x) |a|"
MODEL = "org/model`name"


def test_user_text_is_escaped(tmp_path: Path) -> None:
    space = space_dict(hardware=HARDWARE)
    space["engine"]["model"] = MODEL
    build_study(tmp_path, space, name="escaped")
    export_study("escaped", None, None, tmp_path)
    md = (tmp_path / "escaped" / "commands.md").read_text()
    intro = md.split("\n## ")[0]
    assert "\n# Injected" not in md and "<script>" not in md
    assert "*bold*" not in intro and "[link](http://x)" not in intro
    assert r"\*bold\*" in intro and r"&lt;script&gt;" in intro
    assert "`` org/model`name ``" in intro  # a code span the backtick cannot end
