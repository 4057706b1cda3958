"""The copy of a space a study stores: the same file with its secret values left out.

A secret in ``base.env`` (by the policy of ``tuner.secret_policy``) is stored as ``${NAME}``,
a secret flag in ``base.args`` as ``${FLAG_NAME}`` (the name exports use), and any token-shaped
text is redacted. Rendering reads a ``${NAME}`` secret from the environment
(``tuner.space.render``), so a worker that launches from the stored copy takes the values from
its own environment. A space without secrets is stored as written, byte for byte.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tuner.secret_policy import (
    REDACTED,
    TOKEN_SHAPES,
    env_ref,
    flag_env_name,
    is_env_ref,
    is_secret_env,
    is_secret_flag,
)


def redact_space_data(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a space as YAML data or a model dump) with secret values as ``${NAME}``."""
    out = copy.deepcopy(data)
    base = out.get("base")
    if not isinstance(base, dict):
        return out
    env = base.get("env")
    if isinstance(env, dict):
        for key, value in env.items():
            if is_secret_env(str(key), value) and not is_env_ref(value):
                env[key] = env_ref(str(key))
    args = base.get("args")
    if isinstance(args, dict):
        for key, value in args.items():
            flag = str(key) if str(key).startswith("-") else f"--{key}"
            if _secret_value(flag, value) and not is_env_ref(value):
                args[key] = env_ref(flag_env_name(flag))
    return out


def stored_space_text(text: str) -> str:
    """The text a study stores for the space file ``text``: unchanged if it holds no secret."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return TOKEN_SHAPES.sub(REDACTED, text)  # refused at load anyway
    if not isinstance(data, dict):
        return TOKEN_SHAPES.sub(REDACTED, text)
    redacted = redact_space_data(data)
    if redacted != data:
        text = yaml.safe_dump(redacted, sort_keys=False)
    return TOKEN_SHAPES.sub(REDACTED, text)


def _secret_value(flag: str, value: object) -> bool:
    if value is None or isinstance(value, bool | dict | list):
        return False
    return is_secret_flag(flag, value)
