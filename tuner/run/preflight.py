"""Before any trial: does the engine know the version, flags, values and env the space names?

A space written for one vLLM release and run against another would refuse or ignore knobs in
every trial. ``check_engine`` asks the program that will run: a ``process`` target's on this
machine (``launchers.engine_facts``), a ``docker`` target's inside its image, in a container
without devices (``Launcher.engine_facts``). It refuses, with one line naming the YAML path:

- a pinned ``engine.version`` other than the one ``vllm --version`` prints;
- a flag, in the base args or in any value of a parameter, that ``vllm serve --help=all``
  does not list exactly (with the closest flag it does; argparse would take an abbreviation
  such as ``--max-num-seq``, which a recipe would then carry);
- a value of a flag outside the choices the parser lists for it (or the attention backends
  the release knows);
- a sampled env variable named ``VLLM_*`` that the engine does not read (it would only warn).

A base env variable the engine does not read is the same for every trial: a warning, once.
An image that cannot answer without its devices is a warning saying why and what was not
checked. Where the command is not the ``vllm`` program itself (``python -m ...``, a wrapper,
the simulated engine), the check is skipped with a note, and the static version tables of
``tuner.space.knobs`` are what guards the space.
"""

from __future__ import annotations

import difflib
import shutil
from collections.abc import Iterator
from pathlib import Path

from launchers import (
    EngineFacts,
    FactsUnavailable,
    engine_facts,
    launcher_class,
    parse_version,
    plugin_env,
    requested_flags,
)
from tuner.errors import SpaceError
from tuner.space.knobs import knob_form
from tuner.space.params import Scalar
from tuner.space.render import render_engine_config
from tuner.space.schema import Space

VLLM_ENGINES = ("vllm", "vllm-ascend")
LOCAL_TARGETS = ("process", "docker")


def check_engine(space: Space, path: Path | str, cwd: Path | None = None) -> list[str]:
    """Refuse what the installed engine would not take; return warnings to show once."""
    if space.engine.name not in VLLM_ENGINES or space.target.kind not in LOCAL_TARGETS:
        return []
    word = space.engine.argv_prefix()[0]
    if Path(word).name != "vllm":  # python -m ..., a wrapper script, the simulated engine
        return [f"engine check skipped: {word!r} is not the vllm program"]
    try:
        facts = _ask(space, cwd)
    except FactsUnavailable as err:
        if err.fatal:
            raise SpaceError(f"{path}: engine.command: {err}") from None
        return [f"engine check not done: {err}; {NOT_CHECKED}"]
    _check_version(space, facts, path)
    _check_flags(space, facts, path)
    _check_choices(space, facts, path)
    return _check_env(space, facts, path)


def check_devices(space: Space) -> list[str]:
    """The target's devices, before the first launch (``Launcher.check_devices``)."""
    cls = launcher_class(space.target.kind)
    return cls.check_devices(cls.settings_model.model_validate(space.target.settings()))


NOT_CHECKED = "not checked: the pinned version, flags, flag values and env variables"


def _ask(space: Space, cwd: Path | None) -> EngineFacts:
    """The facts of the program that will run: inside the image, or here."""
    if space.target.kind == "docker":
        cls = launcher_class("docker")
        settings = cls.settings_model.model_validate(space.target.settings())
        facts = cls.engine_facts(settings, list(space.engine.argv_prefix()[:1]))
        assert facts is not None  # the docker kind always has a program to ask
        return facts
    program = engine_program(space, cwd)
    if program is None:
        word = space.engine.argv_prefix()[0]
        raise FactsUnavailable(f"program {word!r} is not found here", fatal=True)
    return engine_facts(program)


def engine_program(space: Space, cwd: Path | None = None) -> Path | None:
    """The engine's executable on this machine, or None when it is not here."""
    word = space.engine.argv_prefix()[0]
    candidate = Path(word) if "/" in word else None
    if candidate is None:
        found = shutil.which(word)
        return Path(found) if found else None
    if not candidate.is_absolute():
        candidate = (cwd or Path.cwd()) / candidate
    return candidate if candidate.is_file() else None


def _check_version(space: Space, facts: EngineFacts, path: Path | str) -> None:
    try:
        installed = parse_version(facts.version)
    except ValueError:
        raise SpaceError(f"{facts.program} --version printed {facts.version!r}") from None
    if installed != space.engine.parsed_version:
        raise SpaceError(
            f"{path}: engine.version: the space pins {space.engine.version} but "
            f"{facts.program} --version says {facts.version}; knobs are written for the pinned "
            "version, so pin the installed one (or install the pinned one)"
        )


def _check_flags(space: Space, facts: EngineFacts, path: Path | str) -> None:
    for where, flag in used_flags(space):
        if facts.knows_flag(flag):
            continue
        close = difflib.get_close_matches(flag, sorted(facts.flags), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise SpaceError(
            f"{path}: {where}: vllm {facts.version} has no flag {flag} "
            f"(checked against `vllm serve --help=all`){hint}"
        )


def _check_choices(space: Space, facts: EngineFacts, path: Path | str) -> None:
    for where, flag, value in used_values(space):
        if facts.takes(flag, value):
            continue
        allowed = sorted(facts.choices[flag])
        close = difflib.get_close_matches(value, allowed, n=1)
        hint = f"; did you mean {close[0]}?" if close else f" (it takes {', '.join(allowed)})"
        raise SpaceError(
            f"{path}: {where}: vllm {facts.version} does not take {flag} {value}{hint}"
        )


def used_values(space: Space) -> Iterator[tuple[str, str, str]]:
    """(YAML path, flag, value) for every ``--flag value`` the baseline or one value renders."""
    base = set(_pairs(render_engine_config(space.model_copy(update={"parameters": {}}), {}).args))
    for flag, value in sorted(base):
        yield f"base.args.{flag.lstrip('-')}", flag, value
    for name, choice in _one_value_changes(space):
        alone = space.model_copy(update={"parameters": {name: space.parameters[name]}})
        for flag, value in sorted(
            set(_pairs(render_engine_config(alone, {name: choice}).args)) - base
        ):
            yield f"parameters.{name}", flag, value


def _pairs(args: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    for i, word in enumerate(args):
        if not word.startswith("--"):
            continue
        if "=" in word:
            yield tuple(word.split("=", 1))  # type: ignore[misc]
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            yield word, args[i + 1]


def used_flags(space: Space) -> Iterator[tuple[str, str]]:
    """(YAML path, flag) for every flag the baseline or any single parameter value renders."""
    base = set(_flags_of(space.model_copy(update={"parameters": {}}), {}))
    for flag in sorted(base):
        yield f"base.args.{flag.lstrip('-')}", flag
    for name, value in _one_value_changes(space):
        alone = space.model_copy(update={"parameters": {name: space.parameters[name]}})
        for flag in sorted(set(_flags_of(alone, {name: value})) - base):
            yield f"parameters.{name}", flag


def _flags_of(space: Space, values: dict[str, Scalar]) -> list[str]:
    args = render_engine_config(space, values).args
    shorts = [word for word in args if word.startswith("-O")]
    return [*requested_flags(args), *shorts]


def _one_value_changes(space: Space) -> Iterator[tuple[str, Scalar]]:
    for name, p in space.parameters.items():
        values: list[Scalar] = list(p.choices or [])
        if not values:
            values = [v for v in (p.low, p.high) if v is not None]
            values = [int(v) for v in values] if p.type == "int" else values
        for value in values:
            yield name, value


def _check_env(space: Space, facts: EngineFacts, path: Path | str) -> list[str]:
    if facts.env is None:
        return [f"env check skipped: cannot find the Python of {facts.program}"]
    for name in space.parameters:
        for var in _sampled_env(space, name):
            if _unknown(space, facts, var):
                raise SpaceError(
                    f"{path}: parameters.{name}: vllm {facts.version} does not read env {var} "
                    "(not in vllm/envs.py); it would warn and ignore it in every trial"
                )
    return [
        f"base.env.{var}: vllm {facts.version} does not read it (it will warn at every start)"
        for var in space.base.env
        if _unknown(space, facts, var)
    ]


def _sampled_env(space: Space, name: str) -> set[str]:
    p = space.parameters[name]
    if p.env is not None:
        return {p.env}
    if p.knob is None:
        return set()
    form = knob_form(space.engine.name, p.knob, space.engine.parsed_version)
    return {var for value in p.choices or () for var, _ in form.render(value).env}


def _unknown(space: Space, facts: EngineFacts, var: str) -> bool:
    assert facts.env is not None
    plugin = plugin_env(space.engine.name, var)
    return var.startswith("VLLM_") and var not in facts.env and not plugin
