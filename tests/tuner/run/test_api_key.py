"""A study against a server that wants an API key: the space names where the key is."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.objectives.servers import keyed_server
from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.cli import main
from tuner.space import load_space, render_engine_config

KEY = "sk-study-31337"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with keyed_server(KEY) as url:
        yield url


def endpoint_space(url: str, **target: Any) -> dict[str, Any]:
    space = copy.deepcopy(SMALL_SPACE)
    space["engine"]["model"] = "m"
    space["target"] = {"kind": "endpoint", "url": url, **target}
    space["parameters"], space["rules"], space["base"] = {}, [], {}
    space["workload"]["dataset"]["vocab_size"] = 500
    space["workload"]["tiers"] = [1]
    # The client shares the test machine's cores with other tests.
    space["workload"]["client_lag_limit_ms"] = 200
    return space


def run(tmp_path: Path, space: dict[str, Any]) -> int:
    path = write_yaml(tmp_path / "keyed.yaml", space)
    args = ["run", "--space", str(path), "--trials", "1", "--confirm", "0"]
    return main([*args, "--results-dir", str(tmp_path / "results")])


def test_the_key_named_by_api_key_env_is_sent_and_never_written(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", KEY)
    assert run(tmp_path, endpoint_space(server, api_key_env="MY_SERVER_KEY")) == 0
    written = [p for p in (tmp_path / "results").rglob("*") if p.is_file()]
    assert written and not any(KEY.encode() in p.read_bytes() for p in written)


def test_no_key_is_one_line_naming_the_fix(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, endpoint_space(server)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    assert "401" in err and "target.api_key_env" in err


def test_an_unset_key_variable_is_refused_before_any_trial(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    assert run(tmp_path, endpoint_space(server, api_key_env="NO_SUCH_KEY_VAR")) == 2
    err = capsys.readouterr().err.strip()
    assert "target.api_key_env" in err and "NO_SUCH_KEY_VAR" in err and "\n" not in err
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").rglob("*.db"))


def test_the_key_is_a_secret_of_the_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", KEY)
    space = load_space(
        write_yaml(tmp_path / "s.yaml", endpoint_space("http://h:1", api_key_env="MY_SERVER_KEY"))
    )
    config = render_engine_config(space, {})
    assert config.client_api_key == KEY and KEY in config.secret_values()
    assert KEY not in config.fingerprint() + config.shell_command() + repr(config)
    flagged = copy.deepcopy(SMALL_SPACE)
    flagged["base"]["args"]["api-key"] = "sk-flag"
    space = load_space(write_yaml(tmp_path / "f.yaml", flagged))
    assert render_engine_config(space, {}).client_api_key == "sk-flag"
