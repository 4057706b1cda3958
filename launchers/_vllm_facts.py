"""What an installed vLLM says about itself: its version, its flags, its env variables.

A space pins a vLLM version and names flags and env vars; all three are checked against the
engine program that will run, before any trial, so a misspelt or removed flag is one clear error
instead of N refused trials. The facts come from the engine itself:

- ``vllm --version``: the last line is the version (``0.32.0+cpu``);
- ``vllm serve --help=all``: every option string its argument parser accepts, and the values
  of those that list their choices (``--kv-cache-dtype {auto,fp8,...}``);
- ``vllm.envs.environment_variables`` imported by the program's own Python (its shebang): the
  variables it reads, the same list it checks when it warns "Unknown vLLM environment
  variable detected", and the attention backends it knows (``AttentionBackendEnum``: the
  parser takes ``--attention-backend`` as a plain string and refuses a wrong one only at start).

A program inside an image is asked the same three questions in one container
(``PROBE_SCRIPT``, ``parse_probe``); see ``launchers/_docker_facts.py``.

Reading them costs about 15 s (three imports of vLLM), so they are cached per program path and
modification time under ``$TUNE_CACHE_DIR`` (default ``~/.cache/tune``).

Where no program can be asked (a space's static checks, the simulated engine), ``FLAG_RELEASES``
says which flags exist only from (or until) a release, from vLLM's release notes and
``vllm/engine/arg_utils.py``: ``--attention-backend`` came with AttentionConfig in 0.11.1,
``--moe-backend`` in 0.17. ``release_facts`` is a release's facts as far as those go.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tuner.errors import TunerError

TIMEOUT_S = 180.0  # importing vLLM on two busy cores takes 5-10 s; a hung import must not hang us
_OPTION = re.compile(r"^\s{2}(-{1,2}[\w.-]+)(.*)$")
_CHOICES = re.compile(r"^\s\{([^{}\s]+)\}")
_ALIAS = re.compile(r",\s*(-{1,2}[\w.-]+)")
_VERSION = re.compile(r"\d+(?:\.\d+)*")

Version = tuple[int, ...]

# Flags a release parses only in [first, until): release notes, vllm/engine/arg_utils.py.
FLAG_RELEASES: dict[str, tuple[Version, Version | None]] = {
    "--attention-backend": ((0, 11, 1), None),
    "--moe-backend": ((0, 17), None),
}
# From this release the scheduler drops --long-prefill-token-threshold while a single request is
# running or waiting ("nobody to starve": vllm/v1/core/sched/scheduler.py of the 0.32.0 CPU
# build). The first release with the rule is not pinned down here; earlier ones are taken to
# cap every chunk, as domain.md's account of the V1 scheduler has it.
LONE_PREFILL_UNCAPPED: Version = (0, 32)
# Where the release keeps its attention backends' names: 0.11.1 onwards, then before.
_BACKEND_MODULES = ("vllm.v1.attention.backends.registry", "vllm.attention.backends.registry")
_ENV_SCRIPT = f"""
import importlib, json, vllm.envs as e
print('TUNE-ENV ' + json.dumps(sorted(e.environment_variables)))
for name in {_BACKEND_MODULES!r}:
    try:
        names = [b.name for b in importlib.import_module(name).AttentionBackendEnum]
    except Exception:
        continue
    print('TUNE-BACKENDS ' + json.dumps(sorted(names)))
    break
"""
# One container asks all three (sh; $1 is the vllm program): each answer after its marker.
PROBE_SCRIPT = """
prog=$(command -v "$1") || { echo "no program $1 on the image's PATH" >&2; exit 127; }
echo TUNE-VERSION; "$prog" --version || exit $?
echo TUNE-HELP; "$prog" serve --help=all || exit $?
py=$(head -n 1 "$prog" | sed 's/^#! *//; s/ .*//')
case "$py" in */python*) echo TUNE-PY; "$py" -c "$2" || true;; esac
"""
ATTENTION_FLAG = "--attention-backend"


class FactsUnavailable(TunerError):
    """The engine program cannot say what it takes here; ``fatal``: nor could a trial start."""

    def __init__(self, reason: str, fatal: bool = False) -> None:
        super().__init__(reason)
        self.fatal = fatal


@dataclass(frozen=True)
class EngineFacts:
    """One installed vLLM: the version it prints, the flags it parses, the env it reads."""

    program: str
    version: str
    flags: frozenset[str]
    env: frozenset[str] | None  # None: the program's Python could not be found
    # The values a flag takes where the parser lists them (``--kv-cache-dtype``: its dtypes).
    choices: dict[str, frozenset[str]] = field(default_factory=dict)

    def takes(self, flag: str, value: str) -> bool:
        """Whether ``flag`` takes ``value`` (a flag with no listed choices takes any)."""
        allowed = self.choices.get(flag)
        return allowed is None or value in allowed

    def knows_flag(self, word: str) -> bool:
        """``--x`` / ``--x=v`` / ``--x.key`` / ``-O3`` forms of an accepted option."""
        name = word.split("=", 1)[0]
        if re.fullmatch(r"-O\d?", name):
            return "--optimization-level" in self.flags or "-O" in self.flags
        return name in self.flags or name.split(".", 1)[0] in self.flags


def parse_version(text: str) -> Version:
    """``"0.14.1"`` -> ``(0, 14, 1)``; suffixes such as ``rc1``, ``+cu129`` or a trailing
    ``(vllm-ascend)`` are dropped."""
    match = _VERSION.match(text.strip().lstrip("v"))
    if match is None:
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(p) for p in match[0].split("."))


def flag_in_release(flag: str, version: Version) -> bool:
    """Whether release ``version`` parses ``flag`` (flags not in ``FLAG_RELEASES`` always)."""
    first, until = FLAG_RELEASES.get(flag, ((0,), None))
    return version >= first and (until is None or version < until)


def caps_lone_prefill(version: Version) -> bool:
    """Whether release ``version`` caps a prefill chunk when its request is the only one."""
    return version < LONE_PREFILL_UNCAPPED


def release_facts(program: str, version: str, flags: frozenset[str]) -> EngineFacts:
    """The facts of release ``version`` of an engine whose parser takes ``flags`` in its
    newest form: the flags that release lacks are left out; its env is not known."""
    v = parse_version(version)
    return EngineFacts(program, version, frozenset(f for f in flags if flag_in_release(f, v)), None)


def read_facts(program: Path) -> EngineFacts:
    """The facts of ``program`` (a ``vllm`` executable), from the cache when still current."""
    cache = cache_file(_program_key(program))
    if (facts := load_cached(cache)) is not None:
        return facts
    help_text = _run([str(program), "serve", "--help=all"])
    env, backends = _env(program)
    facts = make_facts(str(program), _version(_run([str(program), "--version"])), help_text, env)
    facts = with_backends(facts, backends)
    store_cached(cache, facts)
    return facts


def make_facts(
    program: str, version: str, help_text: str, env: frozenset[str] | None
) -> EngineFacts:
    """The facts of a program from its answers; a help text without vLLM's flags is refused."""
    flags = parse_help(help_text)
    if "--max-num-seqs" not in flags:
        raise TunerError(f"{program} serve --help=all lists no --max-num-seqs: not a vLLM")
    return EngineFacts(program, version, flags, env, parse_choices(help_text))


def with_backends(facts: EngineFacts, backends: frozenset[str] | None) -> EngineFacts:
    if backends is None or ATTENTION_FLAG not in facts.flags:
        return facts
    choices = {**facts.choices, ATTENTION_FLAG: backends}
    return EngineFacts(facts.program, facts.version, facts.flags, facts.env, choices)


def parse_probe(program: str, stdout: str) -> EngineFacts:
    """The facts in ``PROBE_SCRIPT``'s output: version, help text, then the Python's lines."""
    rest = stdout.partition("TUNE-VERSION\n")[2]
    version_text, _, rest = rest.partition("TUNE-HELP\n")
    help_text, _, py_text = rest.partition("TUNE-PY\n")
    env, backends = _python_answers(py_text)
    return with_backends(make_facts(program, _version(version_text), help_text, env), backends)


def load_cached(cache: Path) -> EngineFacts | None:
    if not cache.is_file():
        return None
    data = json.loads(cache.read_text())
    env = None if data["env"] is None else frozenset(data["env"])
    choices = {k: frozenset(v) for k, v in data.get("choices", {}).items()}
    return EngineFacts(data["program"], data["version"], frozenset(data["flags"]), env, choices)


def store_cached(cache: Path, facts: EngineFacts) -> None:
    env = None if facts.env is None else sorted(facts.env)
    choices = {k: sorted(v) for k, v in facts.choices.items()}
    data = {"program": facts.program, "version": facts.version, "flags": sorted(facts.flags)}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({**data, "env": env, "choices": choices}))


def parse_help(text: str) -> frozenset[str]:
    """Every option string of an argparse ``--help`` text (``--a, --no-a``, ``--b B, -b B``)."""
    flags: set[str] = set()
    for line in text.splitlines():
        match = _OPTION.match(line)
        if match is None:
            continue
        flags.add(match.group(1))
        flags.update(_ALIAS.findall(match.group(2)))
    return frozenset(flags)


def parse_choices(text: str) -> dict[str, frozenset[str]]:
    """``{flag: values}`` for every option whose help line lists ``{a,b,c}`` after it."""
    out: dict[str, frozenset[str]] = {}
    for line in text.splitlines():
        match = _OPTION.match(line)
        if match is None or (listed := _CHOICES.match(match.group(2))) is None:
            continue
        out[match.group(1)] = frozenset(listed.group(1).split(","))
    return out


def _version(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""


def _env(program: Path) -> tuple[frozenset[str] | None, frozenset[str] | None]:
    python = _interpreter(program)
    if python is None:
        return None, None
    return _python_answers(_run([python, "-c", _ENV_SCRIPT]))


def _python_answers(text: str) -> tuple[frozenset[str] | None, frozenset[str] | None]:
    """The env variables and attention backends ``_ENV_SCRIPT`` printed (None: not said)."""
    found: dict[str, frozenset[str]] = {}
    for line in text.splitlines():
        tag, _, body = line.partition(" ")
        if tag in ("TUNE-ENV", "TUNE-BACKENDS"):
            found[tag] = frozenset(json.loads(body))
    return found.get("TUNE-ENV"), found.get("TUNE-BACKENDS")


def env_script() -> str:
    """The Python ``PROBE_SCRIPT`` runs with the program's interpreter."""
    return _ENV_SCRIPT


def _interpreter(program: Path) -> str | None:
    try:
        first = program.read_bytes()[:256].split(b"\n", 1)[0].decode()
    except (OSError, UnicodeDecodeError):
        return None
    if not first.startswith("#!") or "python" not in first:
        return None
    return first[2:].strip().split()[0]


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise TunerError(f"cannot ask the engine about itself ({' '.join(argv)}): {err}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise TunerError(f"{' '.join(argv)} exited with code {done.returncode}: {last}")
    return done.stdout


def _program_key(program: Path) -> str:
    stat = program.stat()
    return f"{program.resolve()}|{stat.st_mtime_ns}|{stat.st_size}"


def cache_file(key: str) -> Path:
    """Where the facts of ``key`` (a program file's identity, or an image digest) are kept."""
    root = Path(os.environ.get("TUNE_CACHE_DIR") or Path.home() / ".cache" / "tune")
    return root / "engine-facts" / (hashlib.sha256(key.encode()).hexdigest()[:20] + ".json")
