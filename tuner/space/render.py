"""Rendering a trial's parameter values into the ``EngineConfig`` a launcher starts.

Order matters to engines that let later flags win, so the output is deterministic: command,
base flags (a tuned flag replaces a base flag of the same name in place), tuned flags in space
order, JSON flags, then ``--host``/``--port``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from tuner.engine import EngineConfig
from tuner.errors import SetupError
from tuner.secret_policy import is_env_ref, is_secret_env, is_secret_flag
from tuner.space.knobs import knob_form
from tuner.space.params import Parameter, Scalar
from tuner.space.schema import ArgValue, Space

SERVED_NAME_ENGINES = frozenset({"vllm", "vllm-ascend"})


def render_engine_config(
    space: Space,
    values: Mapping[str, Scalar],
    *,
    port: int | None = None,
    host: str | None = None,
    devices: tuple[str, ...] = (),
    labels: Mapping[str, str] | None = None,
) -> EngineConfig:
    """The launch for ``values`` (one per parameter; missing ones take their defaults).

    ``port`` and ``host`` replace the space's ``engine.port`` and ``engine.host``.
    """
    full = {**space.defaults(), **values}
    flags, env = _base(space)
    tuned: dict[str, str] = {}
    _served_name(space, flags)
    json_flags: dict[str, dict[str, Any]] = {}
    unset_json: set[str] = set()
    for name, p in space.parameters.items():
        _render_param(space, p, full[name], flags, tuned, json_flags, unset_json)
    env.update(tuned)
    for flag, obj in json_flags.items():
        if flag not in unset_json:
            flags[flag] = [flag, json.dumps(obj)]
        else:
            flags.pop(flag, None)
    port = port or space.engine.port
    host = host or space.engine.host
    flags["--host"] = ["--host", host]
    flags["--port"] = ["--port", str(port)]
    secret = {k for k, v in env.items() if is_secret_env(k, v)} | set(space.engine.pass_env)
    env.update({k: os.environ[k] for k in space.engine.pass_env if k in os.environ})
    _secrets_from_environ(env, secret, flags)
    return EngineConfig(
        command=tuple(space.engine.argv_prefix()),
        args=tuple(word for words in flags.values() for word in words),
        env=env,
        model=space.engine.request_model,
        port=port,
        host=host,
        devices=devices,
        secret_env=frozenset(secret),
        labels=dict(labels or {}),
        engine=space.engine.name,
        engine_version=space.engine.version,
        params=dict(full),
        tuned_env=frozenset(tuned),
        api_key=api_key(space),
    )


def _secrets_from_environ(
    env: dict[str, str], secret: set[str], flags: dict[str, list[str]]
) -> None:
    """A secret written ``${NAME}`` (as the study's stored copy of the space writes every
    secret) is read from tune's own environment; one not set there stays unresolved (an env
    var is left out, a flag keeps the reference). Any other ``${...}`` value is literal."""
    for key in sorted(secret & set(env)):
        if (name := is_env_ref(env[key])) is not None:
            if name in os.environ:
                env[key] = os.environ[name]
            else:
                del env[key]
    for words in flags.values():
        if words and is_secret_flag(words[0]):
            for i, word in enumerate(words[1:], start=1):
                if (name := is_env_ref(word)) is not None and name in os.environ:
                    words[i] = os.environ[name]


def api_key(space: Space) -> str | None:
    """The key clients send, from the env var ``target.api_key_env`` names (None: not named).

    Raises:
        SetupError: the variable is named but not set here.
    """
    name = space.target.api_key_env
    if name is None:
        return None
    value = os.environ.get(name)
    if not value:
        raise SetupError(
            f"target.api_key_env: env var {name} is not set here; export it with the "
            "server's API key before the run"
        )
    return value


def _served_name(space: Space, flags: dict[str, list[str]]) -> None:
    # vLLM serves a model under its path unless told otherwise: the name clients ask for must
    # reach the engine, or every request (the readiness probe first) is a 404.
    name = space.engine.served_model_name
    if space.engine.name in SERVED_NAME_ENGINES and name and "--served-model-name" not in flags:
        flags["--served-model-name"] = ["--served-model-name", name]


def _base(space: Space) -> tuple[dict[str, list[str]], dict[str, str]]:
    flags: dict[str, list[str]] = {}
    for key, value in space.base.args.items():
        flag = key if key.startswith("-") else f"--{key}"
        flags[_key(flag)] = _flag_words(flag, value)
    env = {k: _text(v) for k, v in space.base.env.items()}
    return flags, env


def _render_param(
    space: Space,
    p: Parameter,
    value: Scalar,
    flags: dict[str, list[str]],
    env: dict[str, str],
    json_flags: dict[str, dict[str, Any]],
    unset_json: set[str],
) -> None:
    if p.json_key is not None:
        flag = p.json_key.flag
        if flag not in json_flags:
            json_flags[flag] = dict(_base_json(space, flag))
        json_flags[flag][p.json_key.key] = value
        if p.is_unset(value):
            unset_json.add(flag)
        return
    if p.is_unset(value):
        return
    if p.flag is not None:
        words = p.render.get(_text(value)) if p.render else None
        flags[_key(p.flag)] = list(words) if words is not None else [p.flag, _text(value)]
    elif p.env is not None:
        env[p.env] = _text(value)
    elif p.knob is not None:
        form = knob_form(space.engine.name, p.knob, space.engine.parsed_version)
        out = form.render(value)
        for i in range(0, len(out.args), 2):
            flags[_key(out.args[i])] = list(out.args[i : i + 2])
        env.update(dict(out.env))


def silenced_by(space: Space) -> dict[str, tuple[tuple[str, Scalar], ...]]:
    """For each parameter, the (sibling, value) pairs that leave it out of the launch: a key of
    a JSON flag is dropped with its whole flag when another key of that flag is at its 'off'
    value (a draft method says nothing with zero draft tokens), as ``_render_param`` does."""
    keyed = {n: p.json_key.flag for n, p in space.parameters.items() if p.json_key is not None}
    offs = {n: p.unset for n, p in space.parameters.items() if n in keyed and p.unset is not None}
    out = {
        name: tuple((o, off) for o, off in offs.items() if o != name and keyed[o] == flag)
        for name, flag in keyed.items()
    }
    return {name: pairs for name, pairs in out.items() if pairs}


def _base_json(space: Space, flag: str) -> Mapping[str, Any]:
    value = space.base.args.get(flag.lstrip("-"), space.base.args.get(flag))
    return value if isinstance(value, dict) else {}


def _flag_words(flag: str, value: ArgValue) -> list[str]:
    if value is True or value is None:
        return [flag]
    if value is False:
        return [f"--no-{flag.lstrip('-')}"]
    if isinstance(value, dict):
        return [flag, json.dumps(value)]
    if isinstance(value, list):
        return [flag, *(_text(v) for v in value)]
    return [flag, _text(value)]


def _key(flag: str) -> str:
    # --no-x and --x are the same setting: the later one must replace the earlier.
    bare = flag.lstrip("-")
    return "--" + bare.removeprefix("no-")


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
