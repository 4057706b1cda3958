"""Ready-to-paste ``vllm serve`` and ``docker run`` commands per tier (``commands.md``).

Every word goes through ``shlex.quote``, so JSON flags survive a shell; a secret flag's value is
written ``"${NAME}"`` for the shell to fill in, and secret env vars are named, never valued. Any
other ``${...}`` or ``$(...)`` is literal: it is single-quoted, never expanded.
The ``docker run`` command is what the docker launcher would start (see ``docker_run``). Both
bind the space's ``engine.serve_host`` (0.0.0.0 unless it says otherwise), not the trial's
``engine.host``: they are for serving other machines (see ``configs``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Sequence
from typing import Any

from objectives.tails import tail_note
from tuner.export.build import Export, TierExport
from tuner.export.configs import Group, LaunchConfig, flag_groups
from tuner.export.docker_run import docker_deploy
from tuner.export.recipe import changed_knobs
from tuner.secret_policy import is_env_ref
from tuner.space.params import check_env_name
from tuner.space.schema import Space


def quote(word: str, refs: Collection[str] = ()) -> str:
    """``word`` for a shell: ``"${NAME}"`` for a secret named in ``refs``, else single-quoted."""
    return f'"{word}"' if is_env_ref(word) in refs else shlex.quote(word)


def render(
    groups: Sequence[Sequence[str]],
    env: dict[str, str] | None = None,
    refs: Collection[str] = (),
) -> str:
    """One group per line, continued with backslashes, after ``K=V`` env assignments."""
    # The value alone is quoted: a quoted "K=V" word would be a command name, not an assignment;
    # the name is one the space checked (letters, digits, '_'), and is checked again here.
    lines = [f"{check_env_name(k)}={shlex.quote(v)}" for k, v in (env or {}).items()]
    lines += [" ".join(quote(w, refs) for w in g) for g in groups if g]
    return " \\\n  ".join(lines)


def serve_groups(launch: LaunchConfig) -> list[Group]:
    return [tuple(launch.program), *flag_groups(launch.args)]


def serve_command(launch: LaunchConfig) -> str:
    return render(serve_groups(launch), launch.env, launch.secret_args)


def docker_command(launch: LaunchConfig, space: Space) -> tuple[str, dict[str, Any]]:
    """The ``docker run`` command, and the target's SDK options it cannot say."""
    deploy = docker_deploy(launch, space)
    groups = deploy.groups + flag_groups(launch.args)
    return render(groups, refs=launch.secret_args), deploy.unrendered


_MD_SPECIAL = re.compile(r"([\\`*_\[\]#|~])")


def md_text(text: str) -> str:
    """User text (the space's hardware, say) as plain markdown text: one line, markdown's
    punctuation backslash-escaped, HTML's made entities, so it shows as written."""
    one_line = " ".join(text.split())
    html = one_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", html)


def md_code(text: str) -> str:
    """User text as an inline code span that no backtick inside it can end."""
    one_line = " ".join(text.split())
    longest = max((len(run) for run in re.findall(r"`+", one_line)), default=0)
    if not longest:
        return f"`{one_line}`"
    fence = "`" * (longest + 1)
    return f"{fence} {one_line} {fence}"


def commands_markdown(export: Export) -> str:
    data = export.data
    lines = [f"# Recommended launches: study {md_code(data.name)}", "", _intro(export), ""]
    for t in export.tiers:
        lines += _tier_section(t, export)
    if export.baseline is not None:
        lines += [
            f"## Baseline (trial {export.baseline.trial})",
            "",
            "Every tuned parameter at its default, as measured first: the reference for the gains.",
            "",
            *_secrets_line(export.baseline),
            "```sh",
            serve_command(export.baseline),
            "```",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def _intro(export: Export) -> str:
    data, obj = export.data, export.data.objective
    text = (
        f"{data.space.engine.name} {data.space.engine.version} serving "
        f"{md_code(data.space.engine.model)} on "
        f"{md_text(data.space.hardware) or 'unspecified hardware'}; "
        f"each tier's config minimises {obj.description} ({obj.name}) "
        "among the configs that served every request of that tier and met its SLOs "
        "(a config that misses an SLO at one tier can still be another tier's answer)."
    )
    if obj.direction == "maximize":
        text = text.replace("minimises", "maximises")
    if data.target_kind == "sim":
        text += (
            "\n\n> Measured on the simulated engine: the commands are exact, the figures are "
            "the simulator's. Re-measure on the real hardware before relying on the gains."
        )
    return text


def _tier_section(t: TierExport, export: Export) -> list[str]:
    head = [f"## c{t.concurrency}: {t.concurrency} concurrent request(s)", ""]
    if t.launch is None or t.tier.recommended is None:
        return [*head, "No feasible config at this tier: see report.html for why.", ""]
    rec = t.tier.recommended
    lines = [*head, f"Trial {rec.trial}. {_figures_line(t, export)}", ""]
    if knobs := changed_knobs(export, t.concurrency):
        changed = "; ".join(f"`{k}={v}`" for k, v in knobs.items())
        lines += [f"Changed from the engine's defaults (how each was measured): {changed}.", ""]
    lines += _secrets_line(t.launch)
    lines += ["```sh", serve_command(t.launch), "```", ""]
    command, extra = docker_command(t.launch, export.data.space)
    lines += ["```sh", command, "```", ""]
    if extra:
        lines += [f"The docker target also sets SDK options with no flag here: `{extra}`.", ""]
    return lines


def _secrets_line(launch: LaunchConfig) -> list[str]:
    if secrets := sorted({*launch.secret_env, *launch.secret_args}):
        names = ", ".join(secrets)
        return [f"Export {names} in your shell first (values are never written here).", ""]
    return []


def _figures_line(t: TierExport, export: Export) -> str:
    rec, base = t.tier.recommended, t.tier.baseline
    assert rec is not None
    m = rec.metrics
    parts = [
        f"p99 TPOT {m.get('p99_tpot_ms', float('nan')):.1f} ms{_rests('p99_tpot_ms', m)}",
        f"median TPOT {m.get('median_tpot_ms', float('nan')):.1f} ms",
        f"p99 TTFT {m.get('p99_ttft_ms', float('nan')):.0f} ms{_rests('p99_ttft_ms', m)}",
        f"{m.get('output_throughput', float('nan')):.1f} output tok/s",
        f"{rec.confirmations} measurement(s), spread {rec.spread * 100:.1f}%",
    ]
    text = ", ".join(parts) + "."
    if t.tier.gain is not None and base is not None:
        key = export.data.objective.key
        word = "lower" if t.tier.gain >= 0 else "higher"
        if export.data.objective.direction == "maximize":
            word = "higher" if t.tier.gain >= 0 else "lower"
        text += (
            f" Baseline (trial {base.trial}) {key} {base.metrics[key]:.1f}"
            f"{_rests(key, base.metrics)}: {abs(t.tier.gain) * 100:.1f}% {word}, "
            f"verdict: {t.tier.verdict or '-'}."
        )
    return text


def _rests(key: str, metrics: dict[str, float]) -> str:
    note = tail_note(key, metrics)
    return f" ({note})" if note else ""
