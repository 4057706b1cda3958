"""Watching an engine start: its log captured, its exit explained, its readiness probed.

- ``LogCapture`` copies an engine's output to ``engine.log`` line by line with secret values
  redacted, keeps the last lines for error messages, and signals the end of the stream (the
  engine exited), so a launcher notices an exit at once instead of at the next poll.
- ``classify_exit`` maps an exit during start-up to a ``FailureKind`` from the log: out of
  memory before refusals (vLLM reports "No available memory for the cache blocks" as a
  ``ValueError``), then vLLM's start-up refusals, else a crash.
- ``wait_until_ready`` polls health and then sends one real completion; it raises as soon as
  the engine is seen gone, and at the deadline otherwise. A completion answered "model does
  not exist" is a set-up error (``SetupError``), raised at once: no config would do better.
  So is a 401 or 403 (the engine wants an API key, or another one): every probe carries the
  key given (``Authorization: Bearer``), and no wait would make a missing key appear.

Knob verification (did the engine apply what was sampled) lives in ``launchers._knobs``; the
launch lifecycle that puts these together, in ``launchers._engine``.
"""

from __future__ import annotations

import codecs
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx

from objectives.answer import fetch_sync
from objectives.endpoint import auth_headers
from tuner.engine import EngineConfig
from tuner.errors import FailureKind, LaunchError, SetupError
from tuner.secret_policy import scrub_text

POLL_S = 0.25  # between health probes; an exit is seen sooner through LogCapture.ended
HEALTH_S = 5.0  # for a whole health answer
MIN_PROBE_S = 1.0  # a probe made at the deadline still gets this long
# Log lines kept to classify a failed launch: vLLM's root cause (an EngineCore ValueError) sits
# 60+ lines above the end, under both processes' tracebacks.
TAIL_LINES = 200

_OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|No available memory for the cache blocks"
    r"|NPU out of memory|out of memory|Cannot allocate memory",
    re.IGNORECASE,
)
# pydantic's "ValidationError: 1 validation error for SchedulerConfig" is how vLLM's config
# classes refuse values; an ImportError names an optional package a sampled method needs.
_VALIDATION = re.compile(r"ValidationError: \d+ validation errors? for \w+")
_REFUSED = re.compile(
    r"\b(ValueError|NotImplementedError|TypeError|AssertionError|ImportError):"
    rf"|{_VALIDATION.pattern}"
    r"|error: (argument|unrecognized arguments|the following arguments)"
    r"|is not supported|are not supported"
)


@dataclass(frozen=True)
class ExitInfo:
    """How an engine ended: exit code, and whether the kernel's OOM killer ended it."""

    code: int
    oom_killed: bool = False


class LogCapture:
    """Engine output -> ``engine.log`` (redacted) + an in-memory tail + an end-of-stream flag."""

    def __init__(self, path: Path, secrets: Iterable[str] = (), tail_lines: int = TAIL_LINES):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("w", encoding="utf-8")
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._lock = threading.Lock()
        self.ended = threading.Event()

    def feed(self, data: bytes) -> None:
        """Append raw output; only complete lines are written, so no secret is split."""
        text = self._partial + self._decoder.decode(data)
        *lines, self._partial = text.split("\n")
        self._write(lines)

    def finish(self) -> None:
        """The stream ended (the engine exited or was stopped): flush and raise ``ended``."""
        rest = self._partial + self._decoder.decode(b"", final=True)
        self._partial = ""
        self._write([rest] if rest else [])
        with self._lock:
            if not self._file.closed:
                self._file.close()
        self.ended.set()

    def redact(self, line: str) -> str:
        return scrub_text(line, self._secrets)

    def tail(self, n: int = TAIL_LINES) -> str:
        with self._lock:
            return "\n".join(list(self._tail)[-n:])

    def text(self) -> str:
        """Everything captured so far, as written to ``engine.log``."""
        with self._lock:
            if not self._file.closed:
                self._file.flush()
        return self.path.read_text(encoding="utf-8", errors="replace")

    def _write(self, lines: list[str]) -> None:
        clean = [self.redact(line.rstrip("\r")) for line in lines]
        with self._lock:
            self._tail.extend(clean)
            if clean and not self._file.closed:
                self._file.write("\n".join(clean) + "\n")
                self._file.flush()


def pump(stream: Callable[[], Iterable[bytes]], capture: LogCapture) -> threading.Thread:
    """Copy ``stream()`` into ``capture`` on a daemon thread; ``finish`` when it ends."""

    def run() -> None:
        try:
            for chunk in stream():
                capture.feed(chunk)
        except Exception as err:  # a broken log stream must not hide the engine's own fate
            capture.feed(f"[tune] log stream ended: {err}\n".encode())
        finally:
            capture.finish()

    thread = threading.Thread(target=run, name="engine-log", daemon=True)
    thread.start()
    return thread


def classify_exit(info: ExitInfo, log_tail: str) -> FailureKind:
    """Why an engine that exited during start-up failed, from its exit and its last lines."""
    if info.oom_killed or _OOM.search(log_tail):
        return FailureKind.OOM
    if _REFUSED.search(log_tail):
        return FailureKind.REFUSED
    return FailureKind.CRASH


def exit_error(info: ExitInfo, log_tail: str, what: str = "engine") -> LaunchError:
    """One line naming exit code, OOM flag and the telling log line; the tail rides along."""
    kind = classify_exit(info, log_tail)
    reason = _telling_line(log_tail, kind)
    oom = ", OOM-killed" if info.oom_killed else ""
    message = f"{what} exited with code {info.code}{oom} during start-up ({kind}): {reason}"
    return LaunchError(message, kind=kind, log_tail=log_tail)


def _telling_line(log_tail: str, kind: FailureKind) -> str:
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    pattern = {FailureKind.OOM: _OOM, FailureKind.REFUSED: _REFUSED}.get(kind)
    if pattern is not None:
        # The last match is the one that ended the engine (earlier ones are often warnings).
        for i in range(len(lines) - 1, -1, -1):
            if pattern.search(lines[i]):
                return _with_details(lines, i)
    return lines[-1] if lines else "(no log output)"


def _with_details(lines: list[str], i: int) -> str:
    # A pydantic error names the class on its line and the field and rule on the next two.
    if not _VALIDATION.search(lines[i]):
        return lines[i]
    details = [x for x in lines[i + 1 : i + 3] if not x.startswith("For further information")]
    return ": ".join([lines[i], *details])


def served_model(config: EngineConfig) -> str:
    """The model name requests must use: ``--served-model-name`` when given."""
    args = list(config.args)
    for i, arg in enumerate(args):
        if arg == "--served-model-name" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--served-model-name="):
            return arg.split("=", 1)[1]
    return config.model


def probe_host(host: str) -> str:
    """Where to reach an engine listening on ``host`` from this machine."""
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def wait_until_ready(
    base_url: str,
    model: str,
    timeout_s: float,
    exited: Callable[[], ExitInfo | None] = lambda: None,
    capture: LogCapture | None = None,
    health_path: str = "/health",
    api_key: str | None = None,
) -> None:
    """Block until health answers 200 and one real completion succeeds.

    ``exited`` is asked before every probe (and whenever ``capture.ended`` fires); an engine
    seen gone raises ``exit_error`` at once. The deadline raises READY_TIMEOUT. ``api_key``
    goes with every probe as a bearer token.

    Raises:
        SetupError: the engine serves another model name, or refuses the key (401 / 403).
    """
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    probe = _Prober(base_url.rstrip("/"), model, api_key)
    while True:
        info = exited()
        if info is not None:
            raise exit_error(info, capture.tail() if capture else "")
        ok, last = probe(health_path, deadline)
        if ok:
            return
        if time.monotonic() >= deadline:
            tail = capture.tail() if capture else ""
            raise LaunchError(
                f"engine not ready after {timeout_s:g}s at {base_url} (last probe: {last})",
                kind=FailureKind.READY_TIMEOUT,
                log_tail=tail,
            )
        _pause(capture, min(POLL_S, max(0.0, deadline - time.monotonic())))


def _pause(capture: LogCapture | None, seconds: float) -> None:
    if capture is not None and not capture.ended.is_set():
        capture.ended.wait(seconds)
    else:
        time.sleep(seconds)


class _Prober:
    """One probe: health, then a real completion; each a whole answer before the deadline
    (a server that drips its answer is cut off there, not waited on read by read)."""

    def __init__(self, base_url: str, model: str, api_key: str | None) -> None:
        self.base_url, self.model, self.api_key = base_url, model, api_key
        self.headers = auth_headers(api_key)

    def __call__(self, health_path: str, deadline: float) -> tuple[bool, str]:
        try:
            health = self._get(health_path, min(HEALTH_S, _left(deadline)))
            self._check(health, health_path)
            if health.status_code != 200:
                return False, f"{health_path} -> {health.status_code}"
            # The first completion may compile kernels: allow it the rest of the deadline.
            body = {"model": self.model, "prompt": "hi", "max_tokens": 1}
            done = self._get("/v1/completions", _left(deadline), json=body)
        except httpx.HTTPError as err:
            return False, f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        self._check(done, "/v1/completions")
        said = self._said(done)
        if done.status_code == 404 and "does not exist" in said:
            raise SetupError(
                f"the engine does not serve model {self.model!r} (/v1/completions -> 404: "
                f"{said}); set engine.served_model_name to a name it serves"
            )
        if done.status_code != 200:
            return False, f"/v1/completions -> {done.status_code}: {said}"
        return True, "ready"

    def _get(self, path: str, seconds: float, json: object = None) -> httpx.Response:
        method = "GET" if json is None else "POST"
        url = self.base_url + path
        return fetch_sync(method, url, seconds, self.headers, json=json)

    def _said(self, resp: httpx.Response) -> str:
        # A server may repeat the key it was sent: what it said is kept with the key scrubbed.
        return scrub_text(" ".join(resp.text.split())[:200], [self.api_key or ""])

    def _check(self, resp: httpx.Response, path: str) -> None:
        _check_auth(resp, path, self.api_key is not None, self._said(resp))


def _left(deadline: float) -> float:
    return max(MIN_PROBE_S, deadline - time.monotonic())


def _check_auth(resp: httpx.Response, path: str, keyed: bool, said: str) -> None:
    """A 401 / 403 is the set-up's fault (a missing or wrong API key), never a wait's."""
    if resp.status_code not in (401, 403):
        return
    if keyed:
        fix = (
            "the API key sent was refused: check the value of the env var "
            "target.api_key_env names (or base.args.api-key)"
        )
    else:
        fix = (
            "the engine wants an API key: name the env var that holds it in "
            "target.api_key_env (or set base.args.api-key)"
        )
    raise SetupError(f"{path} -> {resp.status_code}: {said}; {fix}")
