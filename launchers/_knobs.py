"""Did the engine apply the knobs it was given? Checked after ready, where the engine says so.

vLLM reports what it runs with in three places of its start-up log:

- ``non-default args: {'max_num_seqs': 40, ...}``: the parsed value of every flag that differs
  from its default, as asked, and ``Unknown vLLM environment variable detected:
  VLLM_X`` for an env knob it no longer reads (``VLLM_ATTENTION_BACKEND`` from 0.26 on);
- the engine core's ``Initializing a V1 LLM engine (v0.32.0) with config: model=...,
  enforce_eager=True, enable_prefix_caching=True, ...``: resolved values, after the platform
  and the model had their say (the same text ``/server_info`` serves with
  ``VLLM_SERVER_DEV_MODE=1``); it wins over ``non-default args``, which echoes the request.

Only sampled env knobs (``EngineConfig.tuned_env``) are judged: the space's shared base env is
the same for every trial, so an unknown-variable line for one of those is a ``warning`` of the
report (shown once by the study), never a failed trial. vllm-ascend reads ``VLLM_ASCEND_*``
variables that core vLLM does not know and warns about, so that warning is no evidence there.

A knob is *ignored* only on evidence: the engine reports another value for it, or names its env
variable as unknown. A flag it does not report (a value equal to the default is not listed) or
reports in another form (``192K`` vs ``196608``) stays *unverified*: a false alarm would throw
away a good trial. Launchers raise ``LaunchError(kind=FailureKind.KNOB_IGNORED)`` from
``wait_ready`` when a knob was ignored (their ``verify_knobs`` setting turns this off) and keep
the full ``KnobReport`` on ``launcher.knob_report`` and in ``knobs.json`` beside
``engine.log``, so every trial records what was applied, ignored and left unverified.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tuner.engine import EngineConfig
from tuner.errors import FailureKind, LaunchError

UNKNOWN_ENV_WARNING = "the engine reports it as an unknown environment variable"
_NON_DEFAULT = re.compile(r"non-default args: (.*?)\s*$", re.MULTILINE)
_ENGINE_CONFIG = re.compile(r"Initializing a V1 LLM engine \(v[^)]*\) with config: (.*)$", re.M)
_PAIR = re.compile(r"(\w+)=('[^']*'|[^,\s]+)")
_UNKNOWN_ENV = re.compile(r"Unknown vLLM environment variable detected: (\w+)")
# Enum members print as <Kind.NAME: value>; keep the member name, which is what flags take.
_ENUM = re.compile(r"<[\w.]+\.(\w+): [^<>]*>")


@dataclass
class KnobReport:
    """Per knob (``--flag`` or env name): applied, ignored (with the evidence) or unverified."""

    applied: list[str] = field(default_factory=list)
    ignored: dict[str, str] = field(default_factory=dict)
    unverified: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def error(self) -> LaunchError | None:
        if not self.ignored:
            return None
        why = "; ".join(f"{k}: {v}" for k, v in sorted(self.ignored.items()))
        return LaunchError(f"engine ignored sampled knobs: {why}", kind=FailureKind.KNOB_IGNORED)


def record_knobs(
    config: EngineConfig,
    log_text: str,
    trial_dir: Path,
    server_info: Mapping[str, Any] | str | None = None,
) -> KnobReport:
    """``check_knobs``, written to ``trial_dir / "knobs.json"`` as the trial's record."""
    report = check_knobs(config, log_text, server_info)
    (trial_dir / "knobs.json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    return report


def check_knobs(
    config: EngineConfig, log_text: str, server_info: Mapping[str, Any] | str | None = None
) -> KnobReport:
    """Compare ``config``'s flags and env with what the engine reports it applied."""
    report = KnobReport()
    reported = _reported_args(log_text)
    info = _flatten(server_info) if isinstance(server_info, Mapping) else {}
    info_text = server_info if isinstance(server_info, str) else _engine_config(log_text)
    for flag, (key, wanted) in requested_flags(config.args).items():
        got = _lookup(key, info, info_text, reported)
        verdict = _MISSING if got is _MISSING else _compare(wanted, got)
        if verdict is True:
            report.applied.append(flag)
        elif verdict is False:
            report.ignored[flag] = f"asked {wanted!r}, engine reports {key}={got!r}"
        else:
            report.unverified.append(flag)
    _check_env(config, set(_UNKNOWN_ENV.findall(log_text)), reported is not None, report)
    return report


def _check_env(config: EngineConfig, unknown: set[str], logged: bool, report: KnobReport) -> None:
    for name in sorted(config.env):
        core = name.startswith("VLLM_") and not plugin_env(config.engine, name)
        flagged = core and name in unknown
        if name not in config.tuned_env:
            if flagged:
                report.warnings.append(f"base env {name}: {UNKNOWN_ENV_WARNING}")
        elif flagged:
            report.ignored[name] = UNKNOWN_ENV_WARNING
        elif core and logged:
            report.applied.append(name)  # vLLM names every unknown VLLM_* variable it sees
        else:
            report.unverified.append(name)


def plugin_env(engine: str, name: str) -> bool:
    # Core vLLM validates VLLM_* names against its own list; a platform plugin's variables
    # (vllm-ascend's VLLM_ASCEND_*) are read by the plugin despite that warning.
    return engine == "vllm-ascend" and name.startswith("VLLM_ASCEND_")


def requested_flags(args: tuple[str, ...] | list[str]) -> dict[str, tuple[str, Any]]:
    """``--flag value`` / ``--flag=value`` / ``--flag`` / ``--no-flag`` -> (config key, value)."""
    out: dict[str, tuple[str, Any]] = {}
    items = list(args)
    for i, token in enumerate(items):
        if not token.startswith("--"):
            continue
        name, eq, value = token[2:].partition("=")
        if eq:
            out["--" + name] = (name.replace("-", "_"), _parse(value))
        elif i + 1 < len(items) and not items[i + 1].startswith("--"):
            out["--" + name] = (name.replace("-", "_"), _parse(items[i + 1]))
        elif name.startswith("no-"):
            out["--" + name] = (name[3:].replace("-", "_"), False)
        else:
            out["--" + name] = (name.replace("-", "_"), True)
    return out


_MISSING: Any = object()


def _parse(value: str) -> Any:
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # an engine's report nested past json's depth
        return value


def _engine_config(log_text: str) -> str:
    found = _ENGINE_CONFIG.findall(log_text)
    return found[-1] if found else ""


def _reported_args(log_text: str) -> dict[str, Any] | None:
    """The last ``non-default args`` dict of the log (a restart logs a new one), or None."""
    found = _NON_DEFAULT.findall(log_text)
    if not found:
        return None
    text = _ENUM.sub(lambda m: repr(m.group(1)), found[-1])
    if not text.startswith("{"):  # key=value, as engines that print a config object write it
        return {key: _parse_repr(raw) for key, raw in _PAIR.findall(text)}
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return _loose_dict(text)
    return value if isinstance(value, dict) else None


def _loose_dict(text: str) -> dict[str, Any]:
    # A repr holding objects (paths, devices) is no literal: read the plain top-level pairs.
    out: dict[str, Any] = {}
    for key, raw in re.findall(r"'(\w+)': ('[^']*'|-?[\d.]+|True|False|None)", text):
        out.setdefault(key, ast.literal_eval(raw))
    return out


def _flatten(tree: Mapping[str, Any], out: dict[str, Any] | None = None) -> dict[str, Any]:
    out = {} if out is None else out
    for key, value in tree.items():
        if isinstance(value, Mapping) and key not in out:
            _flatten(value, out)
        out.setdefault(str(key), value)
    return out


def _lookup(key: str, info: dict[str, Any], info_text: str, reported: dict[str, Any] | None) -> Any:
    if key in info:
        return info[key]
    if info_text:
        match = re.search(rf"\b{re.escape(key)}=('[^']*'|[^,\s)]+)", info_text)
        if match:
            return _parse_repr(match.group(1))
    if reported is not None and key in reported:
        return reported[key]
    return _MISSING


def _parse_repr(raw: str) -> Any:
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


def _compare(wanted: Any, got: Any) -> bool | None:
    """True same, False different, None when the two forms cannot be compared."""
    if isinstance(wanted, bool) or isinstance(got, bool):
        return wanted == got if type(wanted) is type(got) else None
    if isinstance(wanted, int | float) and isinstance(got, int | float):
        return float(wanted) == float(got)
    if isinstance(wanted, str) and isinstance(got, str):
        # The engine config prints some values qualified: --dtype bfloat16 is torch.bfloat16.
        return wanted.lower() in (got.lower(), got.lower().rsplit(".", 1)[-1])
    if isinstance(wanted, dict) and isinstance(got, dict):
        # The engine fills in defaults: every key asked for must match, extra keys may exist.
        verdicts = [_compare(v, got[k]) if k in got else None for k, v in wanted.items()]
        return False if False in verdicts else (True if all(verdicts) else None)
    if isinstance(wanted, list) and isinstance(got, list | tuple):
        return [str(v).lower() for v in wanted] == [str(v).lower() for v in got]
    return None
