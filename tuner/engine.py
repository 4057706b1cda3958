"""``EngineConfig``: one fully resolved engine launch, the hand-off from tuner to launchers."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from tuner.secret_policy import REDACTED, is_secret_flag, looks_like_token, scrub_text

__all__ = ["REDACTED", "EngineConfig", "is_flag"]


@dataclass(frozen=True)
class EngineConfig:
    """What a launcher starts: program, flags, env, devices and port.

    ``command`` is the program with its leading words (``vllm serve MODEL``); ``args`` are the
    flags rendered from the space's base args and the trial's sampled parameters. Values of env
    keys in ``secret_env`` must never be written anywhere: use ``public_env()`` for output.
    """

    command: tuple[str, ...]
    args: tuple[str, ...]
    env: Mapping[str, str]
    model: str
    port: int
    host: str = "127.0.0.1"
    devices: tuple[str, ...] = ()
    secret_env: frozenset[str] = frozenset()
    labels: Mapping[str, str] = field(default_factory=dict)
    engine: str = "vllm"
    engine_version: str = ""
    params: Mapping[str, object] = field(default_factory=dict)
    # Env names a sampled parameter set (the rest of ``env`` is the space's shared base): only
    # these are judged by the knob-applied check.
    tuned_env: frozenset[str] = frozenset()
    # The key clients send as ``Authorization: Bearer`` (read at run time from the env var the
    # space names); a secret, so it never shows in a repr. ``client_api_key`` falls back to the
    # engine's own ``--api-key`` flag.
    api_key: str | None = field(default=None, repr=False)

    @property
    def client_api_key(self) -> str | None:
        """What requests to this engine must carry as a bearer token (None: nothing)."""
        return self.api_key or flag_value(self.argv, "--api-key")

    @property
    def argv(self) -> list[str]:
        return [*self.command, *self.args]

    def public_env(self) -> dict[str, str]:
        """The env with every secret value replaced, safe for logs, trial folders and exports."""
        return {k: (REDACTED if k in self.secret_env else v) for k, v in self.env.items()}

    def secret_values(self) -> list[str]:
        """Every credential value this launch carries (secret env values, credential flags)."""
        values = [v for k, v in self.env.items() if k in self.secret_env and v]
        values += [self.api_key] if self.api_key else []
        values += [v for v, hidden in zip(self.argv, self._hidden(), strict=True) if hidden]
        return [v for v in values if v]

    def public_argv(self) -> list[str]:
        """The argv with the values of credential flags replaced, safe to write anywhere."""
        out: list[str] = []
        for word, hidden in zip(self.argv, self._hidden(), strict=True):
            flag, eq, value = word.partition("=")
            if hidden:
                out.append(REDACTED)
            elif eq and flag.startswith("-") and is_secret_flag(flag, value):
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(word)
        return out

    def _hidden(self) -> list[bool]:
        """Per argv word: is it the value of a secret flag (or shaped like a token)?"""
        hidden: list[bool] = []
        secret_flag = False
        for i, word in enumerate(self.argv):
            if is_flag(word):
                nxt = self.argv[i + 1] if i + 1 < len(self.argv) else None
                secret_flag = "=" not in word and is_secret_flag(word, nxt)
                hidden.append(False)
            else:
                hidden.append(secret_flag or looks_like_token(word))
        return hidden

    def scrub(self, text: str) -> str:
        """``text`` with every secret value of this launch (and any token shape) replaced."""
        return scrub_text(text, self.secret_values())

    def shell_command(self) -> str:
        """A paste-able one-liner (env assignments, then argv), secrets redacted."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.public_env().items()))
        cmd = shlex.join(self.public_argv())
        return f"{env} {cmd}" if env else cmd

    def fingerprint(self) -> str:
        """Identity of the launch as the engine sees it (credentials left out)."""
        env = ",".join(f"{k}={v}" for k, v in sorted(self.env.items()) if k not in self.secret_env)
        return shlex.join(self.public_argv()) + " | " + env


def is_flag(word: str) -> bool:
    """Whether an argv word is a flag (``--x``, ``-x``), not a value (``-1``, ``-``)."""
    if not word.startswith("-") or word == "-":
        return False
    try:
        float(word)  # a negative number is a value, not a flag
    except ValueError:
        return True
    return False


def flag_value(argv: tuple[str, ...] | list[str], flag: str) -> str | None:
    """The value of ``flag`` in ``argv`` (``--flag V`` or ``--flag=V``; the last one wins)."""
    found = None
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            found = argv[i + 1]
        elif word.startswith(flag + "="):
            found = word.split("=", 1)[1]
    return found
