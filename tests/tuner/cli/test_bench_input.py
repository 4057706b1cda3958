"""``tune bench``'s own input: the API key it sends, a URL that is not one, nobody listening."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.objectives.servers import keyed_server
from tests.tuner.cli.test_bench import bench_args
from tuner.cli import main

KEY = "sk-cli-7"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_or_saturated(out: Path) -> int:
    # Exit 1 can only mean a tier flagged client-saturated (a busy machine), never a failure.
    doc = json.loads(out.read_text())
    assert all(t["failed"] == 0 for t in doc["tiers"]), doc["tiers"]
    return 1 if any(t["client_saturated"] for t in doc["tiers"]) else 0


def test_api_key_flag_is_sent(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    with keyed_server(KEY) as url:
        code = main(bench_args(url, out, "m", "--api-key", KEY))
    assert code == clean_or_saturated(out)
    assert KEY not in out.read_text()


def test_api_key_defaults_to_openai_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    out = tmp_path / "b.json"
    with keyed_server(KEY) as url:
        code = main(bench_args(url, out, "m"))
    assert code == clean_or_saturated(out)


def test_a_url_that_is_not_one_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(bench_args("notaurl", tmp_path / "b.json")) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --url") and "'notaurl'" in err and err.count("\n") == 1
    assert "saturated" not in err and "stream broken" not in err


def test_nobody_listening_is_a_refused_connection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert main(bench_args(url, tmp_path / "b.json")) == 2
    err = capsys.readouterr().err
    assert err == f"error: the server refused the connection at {url}; is it running?\n"
