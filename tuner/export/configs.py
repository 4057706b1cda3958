"""The launch of a recommended trial as plain data: program, flags, env, secrets named only.

The launch is re-rendered from the recorded space and the trial's parameters, exactly as the
study rendered it, and checked against the fingerprint the trial stored: an export never
recommends a command that differs from the one that was measured, but for the address it binds.
A trial's engine binds ``engine.host`` (127.0.0.1: only the benchmark client on this machine
talks to it); the export is for deployment and binds ``engine.serve_host`` (0.0.0.0). The port
is the space's ``engine.port`` either way, never a slot's port of a parallel run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from optuna.trial import FrozenTrial

from tuner.engine import is_flag
from tuner.export.secrets import Redactor, flag_env_name, is_secret_flag
from tuner.record.trial import TrialRecord
from tuner.space import render_engine_config
from tuner.space.schema import Space

Group = tuple[str, ...]


@dataclass
class LaunchConfig:
    """One engine launch as an export shows it (secret values replaced)."""

    trial: int
    program: list[str]
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    secret_env: list[str] = field(default_factory=list)  # env the engine reads, never valued
    secret_args: list[str] = field(default_factory=list)  # env vars the shell puts in flags
    verified: bool = False  # re-rendered launch == the launch the trial measured, host aside

    @property
    def argv(self) -> list[str]:
        return [*self.program, *self.args]


def launch_config(
    space: Space, trial: FrozenTrial, redactor: Redactor, params: dict[str, Any] | None = None
) -> LaunchConfig:
    """Render the launch of ``params`` (``trial``'s own when None; a pick deploys the knobs
    that cannot act at its tier at their defaults) from the space, bound to
    ``engine.serve_host``, and check the launch as the trial ran it against its stored
    fingerprint; secret values go to ``redactor``."""
    measured = render_engine_config(space, dict(trial.params))
    deployed = dict(trial.params) if params is None else params
    config = render_engine_config(space, deployed, host=space.engine.serve_host)
    secret_env = sorted(config.secret_env)
    redactor.add_env(config.env, secret_env)
    args, flag_secrets = _hide_secret_flags(list(config.args), redactor)
    stored = TrialRecord.of(trial).fingerprint
    return LaunchConfig(
        trial=trial.number,
        program=list(config.command),
        args=args,
        env={k: v for k, v in config.env.items() if k not in config.secret_env},
        secret_env=secret_env,
        secret_args=sorted(set(flag_secrets)),
        verified=stored == measured.fingerprint(),
    )


def collect_secrets(space: Space, redactor: Redactor) -> None:
    """Teach ``redactor`` the space's own secret values, whether or not any trial ran."""
    config = render_engine_config(space, {})
    redactor.add_env(config.env, config.secret_env)
    _hide_secret_flags(list(config.args), redactor)


def _hide_secret_flags(args: list[str], redactor: Redactor) -> tuple[list[str], list[str]]:
    out: list[str] = []
    names: list[str] = []
    for group in flag_groups(args):
        if len(group) > 1 and is_secret_flag(group[0], group[1]):
            name = flag_env_name(group[0])
            for value in group[1:]:
                redactor.add(value)
            out += [group[0], "${" + name + "}"]
            names.append(name)
        else:
            out += group
    return out, names


def flag_groups(args: Sequence[str]) -> list[Group]:
    """``['--a', '1', '--b', '--c', 'x', 'y']`` -> ``[('--a','1'), ('--b',), ('--c','x','y')]``."""
    groups: list[list[str]] = []
    for word in args:
        if is_flag(word) or not groups:
            groups.append([word])
        else:
            groups[-1].append(word)
    return [tuple(g) for g in groups]


def flags_dict(args: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Flag -> its values; what an engine ends up with (a later flag wins, as in argparse)."""
    return {g[0]: g[1:] for g in flag_groups(args)}


@dataclass
class SharedSplit:
    """Flags and env every point has in common, and what each point adds on top."""

    args: list[str]
    env: dict[str, str]
    point_args: list[list[str]]
    point_env: list[dict[str, str]]


def split_shared(configs: Sequence[LaunchConfig]) -> SharedSplit:
    """Split launches into shared base args/env and per-point args/env (order kept)."""
    if not configs:
        return SharedSplit([], {}, [], [])
    per = [flag_groups(c.args) for c in configs]
    common = set(per[0]).intersection(*per[1:])
    shared = [g for g in per[0] if g in common]
    env_items = set(configs[0].env.items()).intersection(*(c.env.items() for c in configs[1:]))
    env = {k: v for k, v in configs[0].env.items() if (k, v) in env_items}
    return SharedSplit(
        args=_flat(shared),
        env=env,
        point_args=[_flat(g for g in groups if g not in common) for groups in per],
        point_env=[{k: v for k, v in c.env.items() if (k, v) not in env_items} for c in configs],
    )


def _flat(groups: Any) -> list[str]:
    return [word for group in groups for word in group]
