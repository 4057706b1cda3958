"""Before any trial: does the installed engine know the version, flags and env the space names?

A space written for one vLLM release and run against another would refuse or ignore knobs in
every trial. Where the engine program is on this machine (a ``process`` target, or a
``docker`` target whose command is a mounted venv's ``vllm``), ``check_engine`` asks it
(``launchers.engine_facts``) and refuses, with one line naming the space's YAML path:

- a pinned ``engine.version`` other than the one ``vllm --version`` prints;
- a flag, in the base args or in any value of a parameter, that ``vllm serve --help=all``
  does not list (with the closest flag it does);
- a sampled env variable named ``VLLM_*`` that the engine does not read (it would only warn).

A base env variable the engine does not read is the same for every trial: a warning, once.
Where the program runs only inside an image that is not here, or the command is not the
``vllm`` program itself (``python -m ...``, a wrapper, the simulated engine), the check is skipped
with a note, and the static version tables of ``tuner.space.knobs`` are what guards the space.
"""

from __future__ import annotations

import difflib
import shutil
from collections.abc import Iterator
from pathlib import Path

from launchers import EngineFacts, engine_facts, parse_version, plugin_env, requested_flags
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
    program = engine_program(space, cwd)
    if program is None:
        if space.target.kind == "process":
            raise SpaceError(f"{path}: engine.command: program {word!r} is not found here")
        return ["engine check skipped: the vLLM program runs inside the image, not here"]
    facts = engine_facts(program)
    _check_version(space, facts, path)
    _check_flags(space, facts, path)
    return _check_env(space, facts, path)


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
