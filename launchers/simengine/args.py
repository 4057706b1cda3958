"""``vllm serve`` arguments and env vars, parsed the way vLLM parses them.

``parse_serve_args`` accepts the common ``vllm serve`` flags (unknown ones are refused as
vLLM's argparse refuses them, exit status 2); ``resolve`` turns flags + env into what the
simulated engine depends on, refusing the combinations vLLM refuses at start-up (see
``refusals.py`` for the rules and their log lines).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from launchers._knobs import requested_flags
from launchers._vllm_facts import release_facts
from launchers.simengine.errors import EngineRefused
from tuner.errors import FailureKind
from tuner.secret_policy import is_secret_flag

_BOOL = argparse.BooleanOptionalAction

# Flags that change nothing in the simulation but must parse (name, takes a value).
_ACCEPTED: tuple[tuple[str, bool], ...] = (
    ("--host", True),
    ("--uvicorn-log-level", True),
    ("--api-key", True),
    ("--ssl-keyfile-password", True),
    ("--tokenizer", True),
    ("--revision", True),
    ("--download-dir", True),
    ("--dtype", True),
    ("--seed", True),
    ("--chat-template", True),
    ("--tool-call-parser", True),
    ("--reasoning-parser", True),
    ("--swap-space", True),
    ("--max-logprobs", True),
    ("--distributed-executor-backend", True),
    ("--generation-config", True),
    ("--override-generation-config", True),
    ("--hf-overrides", True),
    ("--limit-mm-per-prompt", True),
    ("--mm-processor-cache-gb", True),
    ("--scheduling-policy", True),
    ("--cuda-graph-sizes", True),
    ("--all2all-backend", True),
    ("--max-seq-len-to-capture", True),
    ("--tokenizer-mode", True),
    ("--config", True),
    ("--eplb-config", True),
    ("--kv-transfer-config", True),
    ("--data-parallel-size", True),
    ("--pipeline-parallel-size", True),
    ("--max-cudagraph-capture-size", True),
    ("--trust-remote-code", False),
    ("--enable-auto-tool-choice", False),
    ("--disable-log-requests", False),
    ("--enable-log-requests", False),
    ("--disable-log-stats", False),
    ("--enforce-eager", False),
    ("--enable-eplb", False),
    ("--disable-custom-all-reduce", False),
    ("--disable-uvicorn-access-log", False),
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise EngineRefused(f"{self.prog}: error: {message}", FailureKind.REFUSED, exit_code=2)


def _int_tokens(text: str) -> int:
    """vLLM accepts human-readable sizes for token counts: 196608, 192k, 1M."""
    t = text.strip().lower()
    scale = {"k": 1024, "m": 1024 * 1024}.get(t[-1:], 1)
    return int(float(t[:-1]) * scale) if scale > 1 else int(t)


def _json(text: str) -> dict[str, object]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="vllm serve", add_help=False)
    p.add_argument("model_tag", nargs="?", default=None)
    p.add_argument("--model", default=None)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", nargs="+", default=None)
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--enable-expert-parallel", action=_BOOL, default=False)
    p.add_argument("--max-model-len", type=_int_tokens, default=None)
    p.add_argument(
        "--kv-cache-dtype",
        default="auto",
        choices=["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"],
    )
    p.add_argument("--enable-prefix-caching", action=_BOOL, default=None)
    p.add_argument("--block-size", type=int, default=None)
    p.add_argument("--load-format", default="auto")
    p.add_argument("--quantization", "-q", default=None)
    p.add_argument("--additional-config", type=_json, default={})
    p.add_argument("--compilation-config", "-O", default=None)
    p.add_argument("--optimization-level", type=int, choices=range(4), default=None)
    p.add_argument("--attention-backend", default=None)
    p.add_argument("--moe-backend", default="auto")
    p.add_argument("--max-num-batched-tokens", type=_int_tokens, default=None)
    p.add_argument("--long-prefill-token-threshold", type=_int_tokens, default=0)
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--speculative-config", type=_json, default=None)
    p.add_argument("--async-scheduling", action=_BOOL, default=None)
    p.add_argument("--gpu-memory-utilization", type=float, default=None)
    p.add_argument("--max-num-partial-prefills", type=int, default=1)
    p.add_argument("--max-long-partial-prefills", type=int, default=1)
    p.add_argument("--enable-chunked-prefill", action=_BOOL, default=None)
    for name, takes_value in _ACCEPTED:
        if takes_value:
            p.add_argument(name)
        else:
            p.add_argument(name, action="store_true")
    return p


def non_default_args(ns: argparse.Namespace) -> dict[str, object]:
    """What vLLM's ``non-default args: {...}`` line holds: each parsed flag unlike its default.

    vLLM prints credentials there too (--api-key, --ssl-keyfile-password); the simulated
    engine leaves out every flag the secret policy calls secret, so no log of it holds one."""
    parser = build_parser()
    return {
        k: v
        for k, v in vars(ns).items()
        if v != parser.get_default(k) and not is_secret_flag("--" + k.replace("_", "-"), v)
    }


def parse_serve_args(argv: Sequence[str], version: str | None = None) -> argparse.Namespace:
    """Parses ``vllm serve`` flags as release ``version`` does (None: every flag known here);
    raises ``EngineRefused`` (exit 2) as argparse would, for a flag that release lacks too."""
    args = list(argv)
    if args[:2] == ["vllm", "serve"]:
        args = args[2:]
    parser = build_parser()
    if version is not None:
        _refuse_unreleased(parser, args, version)
    try:
        return parser.parse_args(args)
    except ValueError as err:  # a JSON flag that does not parse
        raise EngineRefused(f"vllm serve: error: {err}", FailureKind.REFUSED, exit_code=2) from err


def _refuse_unreleased(parser: argparse.ArgumentParser, args: list[str], version: str) -> None:
    facts = release_facts("vllm", version, frozenset(parser._option_string_actions))
    lacking = [flag for flag in requested_flags(args) if not facts.knows_flag(flag)]
    if lacking:
        raise EngineRefused(
            f"vllm serve: error: unrecognized arguments: {' '.join(lacking)} (vLLM {version})",
            FailureKind.REFUSED,
            exit_code=2,
        )


@dataclass(frozen=True)
class Env:
    """The env vars the simulated engine reads (unset -> the release's default)."""

    values: Mapping[str, str]

    def flag(self, name: str, default: bool) -> bool:
        raw = self.values.get(name)
        return default if raw is None else raw.strip().lower() in {"1", "true", "yes", "on"}

    def int(self, name: str, default: int) -> int:
        raw = self.values.get(name)
        try:
            return default if raw is None or raw == "" else int(raw)
        except ValueError:
            raise EngineRefused(
                f"ValueError: invalid literal for int() with base 10: {raw!r} ({name})",
                FailureKind.REFUSED,
            ) from None

    def str(self, name: str) -> str | None:
        raw = self.values.get(name)
        return raw if raw else None
