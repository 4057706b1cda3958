"""Knobs whose form depends on the engine version a space pins.

vLLM moves settings between env vars and flags from release to release; an env var a release no
longer reads is silently ignored, which would make a whole study measure nothing. A space names
such settings by knob (``knob: attention_backend``) and they render to the form the pinned
version reads; a binding the pinned version would ignore is refused up front.

Versions (from vLLM's release notes and source): ``--attention-backend`` appeared with
AttentionConfig in 0.11.1 and the env var stopped being read in 0.26; ``--moe-backend`` exists
from 0.17, before which FlashInfer MoE was chosen with ``VLLM_USE_FLASHINFER_MOE_*`` env vars;
``--load-format fastsafetensors`` replaced ``SAFETENSORS_FAST_GPU=1`` from 0.9. Which release
first parses a flag is ``launchers.FLAG_RELEASES`` (one table in ``launchers/_vllm_facts.py``),
which the simulated engine reads too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from launchers import FLAG_RELEASES, Version, parse_version

__all__ = ["KNOBS", "KnobForm", "Rendered", "Version", "ignored_env", "knob_form", "parse_version"]


@dataclass(frozen=True)
class Rendered:
    """What one knob value becomes for the engine: flags and env assignments."""

    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


Renderer = Callable[[object], Rendered]


@dataclass(frozen=True)
class KnobForm:
    """How a knob is written for versions in ``[since, until)``, and which values it accepts."""

    since: Version
    until: Version | None
    render: Renderer
    values: frozenset[str] | None = None  # None: any value of the parameter

    def covers(self, version: Version) -> bool:
        return version >= self.since and (self.until is None or version < self.until)


def _flag(name: str) -> Renderer:
    return lambda v: Rendered(args=(name, str(v)))


def _env(name: str) -> Renderer:
    return lambda v: Rendered(env=((name, str(v)),))


_OLD_MOE_ENV = {
    "auto": (),
    "flashinfer_cutlass": (
        ("VLLM_USE_FLASHINFER_MOE_FP8", "1"),
        ("VLLM_USE_FLASHINFER_MOE_FP16", "1"),
        ("VLLM_FLASHINFER_MOE_BACKEND", "throughput"),
    ),
    "flashinfer_trtllm": (
        ("VLLM_USE_FLASHINFER_MOE_FP8", "1"),
        ("VLLM_USE_FLASHINFER_MOE_FP16", "1"),
        ("VLLM_FLASHINFER_MOE_BACKEND", "latency"),
    ),
}


def _fast_loading(on: object) -> Rendered:
    return Rendered(args=("--load-format", "fastsafetensors")) if _truthy(on) else Rendered()


def _fast_loading_env(on: object) -> Rendered:
    return Rendered(env=(("SAFETENSORS_FAST_GPU", "1"),)) if _truthy(on) else Rendered()


def _truthy(value: object) -> bool:
    return str(value).lower() in {"1", "true", "on", "yes"}


# A flag's first release is a fact of vLLM's (launchers' FLAG_RELEASES); before it, the env form.
_ATTENTION_FLAG = FLAG_RELEASES["--attention-backend"][0]
_MOE_FLAG = FLAG_RELEASES["--moe-backend"][0]

VLLM_KNOBS: dict[str, tuple[KnobForm, ...]] = {
    "attention_backend": (
        KnobForm(_ATTENTION_FLAG, None, _flag("--attention-backend")),
        KnobForm((0,), _ATTENTION_FLAG, _env("VLLM_ATTENTION_BACKEND")),
    ),
    "moe_backend": (
        KnobForm(_MOE_FLAG, None, _flag("--moe-backend")),
        KnobForm(
            (0,),
            _MOE_FLAG,
            lambda v: Rendered(env=_OLD_MOE_ENV[str(v)]),
            values=frozenset(_OLD_MOE_ENV),
        ),
    ),
    "fast_loading": (
        KnobForm((0, 9), None, _fast_loading),
        KnobForm((0,), (0, 9), _fast_loading_env),
    ),
}

# Env vars a version range no longer reads (silently): binding them directly is refused.
# VLLM_USE_V1 left vllm/envs.py with the V0 engine (0.12): V1 is the only engine since.
_V1_ONLY = ("VLLM_USE_V1", (0, 12), "V1 is the only engine; drop it")
IGNORED_ENV: dict[str, tuple[tuple[str, Version, str], ...]] = {
    "vllm": (("VLLM_ATTENTION_BACKEND", (0, 26), "use 'knob: attention_backend'"), _V1_ONLY),
    "vllm-ascend": (
        ("VLLM_ATTENTION_BACKEND", (0, 26), "use 'knob: attention_backend'"),
        _V1_ONLY,
        ("VLLM_ASCEND_ENABLE_TOPK_OPTIMIZE", (0,), "it has no effect on vllm-ascend"),
    ),
}

KNOBS: dict[str, dict[str, tuple[KnobForm, ...]]] = {
    "vllm": VLLM_KNOBS,
    "vllm-ascend": VLLM_KNOBS,
}


def knob_form(engine: str, knob: str, version: Version) -> KnobForm:
    """The form ``knob`` takes on ``engine`` at ``version``; ``KeyError`` text says why not."""
    forms = KNOBS.get(engine, {})
    if knob not in forms:
        valid = ", ".join(sorted(forms)) or "none"
        raise KeyError(f"unknown knob {knob!r} for engine {engine!r}; known knobs: {valid}")
    for form in forms[knob]:
        if form.covers(version):
            return form
    raise KeyError(f"knob {knob!r} does not exist in {engine} {'.'.join(map(str, version))}")


def ignored_env(engine: str, name: str, version: Version) -> str | None:
    """Why ``name`` would be silently ignored at ``version``, or None when it is read."""
    for env, since, advice in IGNORED_ENV.get(engine, ()):
        if env == name and version >= since:
            return f"{engine} {'.'.join(map(str, version))} ignores env {name} ({advice})"
    return None
