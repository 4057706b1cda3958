"""Keeping secrets out of exports.

A secret reaches an engine three ways: an env var named like one (``HF_TOKEN``), an env var the
space copies from tune's own environment (``engine.pass_env``), or a flag whose name says so
(``--api-key``). Exports show the name and never the value: env secrets are left for the shell
to pass on, secret flags read ``${NAME}`` so a pasted command takes the value from the env.
Every export file is then scanned for the values known to this process, as a last guard.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from tuner.errors import SecretLeakError

# A flag is secret when its last words say so: --hf-token, --api-key, but not
# --max-num-batched-tokens.
SECRET_FLAG = re.compile(r"(^|-)(token|secret|password|passwd|api-key|access-key|key-id)$", re.I)
# The env var each engine reads for a secret flag, so "${NAME}" is the natural stand-in.
FLAG_ENV = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN"}
REDACTED = "<redacted>"
# Well-known token shapes, for free text (failure reasons, log lines) holding a secret this
# process was never told about (an HF_TOKEN set only when the study ran).
TOKEN_SHAPES = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,})\b"
    r"|(?<=Bearer )[A-Za-z0-9._~+/-]{16,}=*",
    re.IGNORECASE,
)
_MIN_LEN = 4  # shorter values ("1", "yes") would match everywhere and are no secret anyway


def is_secret_flag(flag: str) -> bool:
    return flag.startswith("-") and bool(SECRET_FLAG.search(flag.lstrip("-")))


def flag_env_name(flag: str) -> str:
    """``--api-key`` -> ``VLLM_API_KEY``; any other secret flag -> its name in capitals."""
    return FLAG_ENV.get(flag, flag.lstrip("-").replace("-", "_").upper())


class Redactor:
    """Collects secret values and removes them from any text an export writes."""

    def __init__(self) -> None:
        self.values: set[str] = set()

    def add(self, value: str | None) -> None:
        if value and len(value) >= _MIN_LEN and value != REDACTED:
            self.values.add(value)

    def add_env(self, env: Mapping[str, str], secret_keys: Iterable[str]) -> None:
        for key in secret_keys:
            self.add(env.get(key))
            self.add(os.environ.get(key))

    def scrub(self, text: str) -> str:
        # Longest first, so a secret containing another is replaced whole.
        for value in sorted(self.values, key=len, reverse=True):
            text = text.replace(value, REDACTED)
        return TOKEN_SHAPES.sub(REDACTED, text)

    def check(self, path: Path, text: str) -> None:
        """Raise if ``text`` (bound for ``path``) holds a known secret value, naming no value."""
        for value in self.values:
            if value in text:
                raise SecretLeakError(
                    f"{path}: would hold the value of a secret ({len(value)} characters); "
                    "export refused"
                )
