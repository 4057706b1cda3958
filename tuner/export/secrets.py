"""Keeping secrets out of exports (the policy itself is ``tuner.secret_policy``).

A secret reaches an engine three ways: an env var named like one (``HF_TOKEN``), an env var the
space copies from tune's own environment (``engine.pass_env``), or a flag whose name says so
(``--api-key``). Exports show the name and never the value: env secrets are left for the shell
to pass on, secret flags read ``${NAME}`` so a pasted command takes the value from the env.
Every export file is then scanned for the values known to this process, as a last guard.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from tuner.errors import SecretLeakError
from tuner.secret_policy import REDACTED, flag_env_name, is_env_ref, is_secret_flag, scrub_text

__all__ = ["REDACTED", "Redactor", "flag_env_name", "is_secret_flag"]

_MIN_LEN = 4  # shorter values ("1", "yes") would match everywhere and are no secret anyway


class Redactor:
    """Collects secret values and removes them from any text an export writes."""

    def __init__(self) -> None:
        self.values: set[str] = set()

    def add(self, value: str | None) -> None:
        if value and len(value) >= _MIN_LEN and value != REDACTED and not is_env_ref(value):
            self.values.add(value)

    def add_env(self, env: Mapping[str, str], secret_keys: Iterable[str]) -> None:
        for key in secret_keys:
            self.add(env.get(key))
            self.add(os.environ.get(key))

    def scrub(self, text: str) -> str:
        return scrub_text(text, self.values)

    def check(self, path: Path, text: str) -> None:
        """Raise if ``text`` (bound for ``path``) holds a known secret value, naming no value."""
        for value in self.values:
            if value in text:
                raise SecretLeakError(
                    f"{path}: would hold the value of a secret ({len(value)} characters); "
                    "export refused"
                )
