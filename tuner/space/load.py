"""Reading a space file: YAML -> ``Space``, every failure as one ``SpaceError`` line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from launchers import LauncherSettings, launcher_class
from tuner.errors import SpaceError
from tuner.space.schema import Space
from tuner.space.yaml_text import YamlLimitError, read_yaml_text


def load_space(path: Path | str) -> Space:
    """Parse and validate a space file, including its target's launcher settings.

    Raises:
        SpaceError: naming the file, the YAML path, the rule and the bad value.
    """
    path = Path(path)
    data = _read_yaml(path)
    try:
        space = Space.model_validate(data)
    except ValidationError as err:
        raise SpaceError(f"{path}: {format_validation_error(err)}") from None
    settings_of(space, path)
    if space.sim is not None:  # what '--launcher sim' runs: refused now, not in a trial
        sim = launcher_class("sim").settings_model
        try:
            sim.model_validate(space.sim)
        except ValidationError as err:
            raise SpaceError(f"{path}: {format_validation_error(err, prefix='sim')}") from None
    return space


def settings_of(space: Space, path: Path | str = "<space>") -> LauncherSettings:
    """The target's launcher settings, validated by that kind's own model."""
    try:
        cls = launcher_class(space.target.kind)
    except SpaceError as err:
        raise SpaceError(f"{path}: target.kind: {err}") from None
    try:
        settings = cls.settings_model.model_validate(space.target.settings())
    except ValidationError as err:
        raise SpaceError(f"{path}: {format_validation_error(err, prefix='target')}") from None
    if space.parameters and not getattr(cls, "accepts_engine_params", True):
        raise SpaceError(
            f"{path}: parameters: a '{space.target.kind}' target benchmarks a running server "
            f"as is and cannot apply engine parameters ({', '.join(space.parameters)})"
        )
    return settings


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise SpaceError(f"{path}: cannot read space file ({err.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise SpaceError(
            f"{path}: not UTF-8 text: byte 0x{raw[err.start]:02x} at line {line}, column "
            f"{column}; save the file as UTF-8"
        ) from None
    try:
        data = read_yaml_text(text)
    except YamlLimitError as err:
        raise SpaceError(f"{path}: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise SpaceError(f"{path}: malformed YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise SpaceError(f"{path}: a space file must be a YAML mapping (got {type(data).__name__})")
    if (bad := _non_finite(data)) is not None:
        raise SpaceError(f"{path}: {bad}: not a finite number; give a number or leave it out")
    return data


def _non_finite(data: Any, where: str = "") -> str | None:
    """The YAML path of the first .nan / .inf in ``data`` (None: there is none). Checked here
    for every section at once, the launcher's settings and engine flags included."""
    if isinstance(data, float) and not math.isfinite(data):
        return f"{where or '(top level)'} ({data})"
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    for key, value in items:
        inner = _yaml_path((where, key)) if where else _yaml_path((key,))
        if (found := _non_finite(value, inner)) is not None:
            return found
    return None


def format_validation_error(err: ValidationError, prefix: str = "") -> str:
    """The first error as 'yaml.path: rule (got value)', plus how many more there are."""
    errors = err.errors(include_url=False)
    first = errors[0]
    where = _yaml_path((prefix, *first["loc"]) if prefix else first["loc"]) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    got = ""
    if first["type"] not in {"value_error", "assertion_error", "missing"}:
        got = f" (got {_short(first.get('input'))})"
    more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
    return f"{where}: {msg}{got}{more}"


def _yaml_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part:
            out += f".{part}" if out else str(part)
    return out


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
