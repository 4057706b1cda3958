"""Log capture, failure classification and readiness probing shared by the launchers."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from launchers._startup import (
    ExitInfo,
    LogCapture,
    classify_exit,
    exit_error,
    served_model,
    wait_until_ready,
)
from tests.launchers.helpers import loopback_config
from tuner.errors import FailureKind, LaunchError


def test_capture_redacts_secrets_split_across_chunks(tmp_path: Path) -> None:
    capture = LogCapture(tmp_path / "engine.log", ["tok_ABCDEF", "tok_AB"])
    capture.feed(b"loading with tok_AB")
    capture.feed(b"CDEF and tok_AB\npartial line no newline")
    capture.finish()
    text = (tmp_path / "engine.log").read_text()
    assert text == "loading with <redacted> and <redacted>\npartial line no newline\n"
    assert capture.ended.is_set()
    assert capture.tail(1) == "partial line no newline"


def test_capture_survives_broken_utf8(tmp_path: Path) -> None:
    capture = LogCapture(tmp_path / "engine.log")
    capture.feed("é".encode()[:1])
    capture.feed("é\n".encode()[1:] + b"\xff\n")
    capture.finish()
    assert capture.text().splitlines() == ["é", "\ufffd"]


@pytest.mark.parametrize(
    ("tail", "info", "kind"),
    [
        ("ValueError: --max-num-partial-prefills must be 1", ExitInfo(1), FailureKind.REFUSED),
        ("vllm serve: error: unrecognized arguments: --foo", ExitInfo(2), FailureKind.REFUSED),
        ("torch.OutOfMemoryError: CUDA out of memory.", ExitInfo(1), FailureKind.OOM),
        ("ValueError: No available memory for the cache blocks.", ExitInfo(1), FailureKind.OOM),
        ("loading weights", ExitInfo(137, oom_killed=True), FailureKind.OOM),
        ("RuntimeError: NCCL error", ExitInfo(1), FailureKind.CRASH),
        ("", ExitInfo(139), FailureKind.CRASH),
    ],
)
def test_classify_exit(tail: str, info: ExitInfo, kind: FailureKind) -> None:
    assert classify_exit(info, tail) is kind


def test_exit_error_names_the_line_that_ended_the_engine() -> None:
    tail = "WARNING ValueError: ignored earlier\nINFO loading\nValueError: the real refusal\nbye"
    err = exit_error(ExitInfo(1), tail)
    assert str(err) == (
        "engine exited with code 1 during start-up (refused): ValueError: the real refusal"
    )
    assert err.log_tail == tail


def test_served_model_name_forms() -> None:
    assert served_model(loopback_config(1)) == "m"
    assert served_model(loopback_config(1, "--served-model-name", "a")) == "a"
    assert served_model(loopback_config(1, "--served-model-name=b")) == "b"


class _Flaky(BaseHTTPRequestHandler):
    """Healthy, but completions fail until the third one (a model still warming up)."""

    calls = 0

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).calls += 1
        code = 200 if type(self).calls >= 3 else 503
        self.send_response(code)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


def test_ready_needs_a_real_completion() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        wait_until_ready(url, "m", 10)
        assert _Flaky.calls == 3
    finally:
        server.shutdown()


def test_exit_seen_before_the_deadline() -> None:
    with pytest.raises(LaunchError) as caught:
        wait_until_ready("http://127.0.0.1:9", "m", 60, exited=lambda: ExitInfo(3))
    assert caught.value.kind is FailureKind.CRASH
    assert "code 3" in str(caught.value)
