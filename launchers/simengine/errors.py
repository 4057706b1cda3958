"""Errors of the simulated engine: refusals at start-up."""

from __future__ import annotations

from tuner.errors import FailureKind


class EngineRefused(Exception):
    """vLLM would not start: the message is the line it prints, ``kind`` why (refused, OOM).

    ``exit_code`` is the status the engine process exits with (2 for argparse errors, 1
    otherwise), which the HTTP server's entry point returns.
    """

    def __init__(self, message: str, kind: FailureKind, exit_code: int = 1) -> None:
        super().__init__(message)
        self.kind = kind
        self.exit_code = exit_code
