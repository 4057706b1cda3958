"""The exports are commands to deploy: they bind ``engine.serve_host``, not the trial's host.

A trial's engine binds ``engine.host`` (127.0.0.1, for the benchmark client on the same
machine); a server started from commands.md or recipe.yaml must take requests from others.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.tuner.export.conftest import build_study, space_dict
from tuner.export import export_study
from tuner.export.configs import flags_dict
from tuner.export.recipe import point_launch


def _export(results: Path, **engine: Any) -> Path:
    space = space_dict()
    space["engine"] = {**space["engine"], "host": "127.0.0.1", "port": 8123, **engine}
    build_study(results, space, name="deploy")
    export_study("deploy", None, None, results)
    return results / "deploy"


def _hosts(markdown: str) -> list[str]:
    """The ``--host`` value of every command block in ``markdown``."""
    blocks = re.findall(r"```sh\n(.*?)\n```", markdown, flags=re.S)
    return [re.findall(r"--host (\S+)", b)[-1] for b in blocks]


def _recipe(out: Path) -> dict[str, Any]:
    return dict(yaml.safe_load((out / "recipe.yaml").read_text()))


def test_exports_bind_all_interfaces_while_trials_bound_localhost(tmp_path: Path) -> None:
    out = _export(tmp_path)
    hosts = _hosts((out / "commands.md").read_text())
    assert len(hosts) == 5 and set(hosts) == {"0.0.0.0"}  # 2 tiers x serve+docker, baseline
    recipe = _recipe(out)
    preset = recipe["presets"]["deploy"]
    assert preset["serve"] == {"host": "0.0.0.0", "port": 8123}  # apart from the args
    assert not {"--host", "--port"} & set(flags_dict(preset["args"]))
    for key, point in recipe["presets"]["deploy"]["points"].items():
        launch = point_launch(recipe, "deploy", key)
        assert flags_dict(launch.args)["--host"] == ("0.0.0.0",)
        assert flags_dict(launch.args)["--port"] == ("8123",)  # the space's port, kept
        assert point["verified"] is True  # the trial's own launch (127.0.0.1) was checked
    assert "127.0.0.1" not in (out / "commands.md").read_text()
    assert "127.0.0.1" not in (out / "report.html").read_text()


def test_serve_host_of_the_space_is_respected(tmp_path: Path) -> None:
    out = _export(tmp_path, serve_host="10.1.2.3")
    assert set(_hosts((out / "commands.md").read_text())) == {"10.1.2.3"}
    assert _recipe(out)["presets"]["deploy"]["serve"]["host"] == "10.1.2.3"
