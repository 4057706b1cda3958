"""What an installed vLLM says about itself: its version, its flags, its env variables.

A space pins a vLLM version and names flags and env vars; all three are checked against the
engine program that will run, before any trial, so a misspelt or removed flag is one clear error
instead of N refused trials. The facts come from the engine itself:

- ``vllm --version``: the last line is the version (``0.32.0+cpu``);
- ``vllm serve --help=all``: every option string its argument parser accepts;
- ``vllm.envs.environment_variables`` imported by the program's own Python (its shebang): the
  variables it reads, the same list it checks when it warns "Unknown vLLM environment
  variable detected".

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
from dataclasses import asdict, dataclass
from pathlib import Path

from tuner.errors import TunerError

TIMEOUT_S = 180.0  # importing vLLM on two busy cores takes 5-10 s; a hung import must not hang us
_OPTION = re.compile(r"^\s{2}(-{1,2}[\w.-]+)(.*)$")
_ALIAS = re.compile(r",\s*(-{1,2}[\w.-]+)")
_VERSION = re.compile(r"\d+(?:\.\d+)*")

Version = tuple[int, ...]

# Flags a release parses only in [first, until): release notes, vllm/engine/arg_utils.py.
FLAG_RELEASES: dict[str, tuple[Version, Version | None]] = {
    "--attention-backend": ((0, 11, 1), None),
    "--moe-backend": ((0, 17), None),
}
_ENV_SCRIPT = (
    "import json, vllm.envs as e; print('TUNE-ENV ' + json.dumps(sorted(e.environment_variables)))"
)


@dataclass(frozen=True)
class EngineFacts:
    """One installed vLLM: the version it prints, the flags it parses, the env it reads."""

    program: str
    version: str
    flags: frozenset[str]
    env: frozenset[str] | None  # None: the program's Python could not be found

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


def release_facts(program: str, version: str, flags: frozenset[str]) -> EngineFacts:
    """The facts of release ``version`` of an engine whose parser takes ``flags`` in its
    newest form: the flags that release lacks are left out; its env is not known."""
    v = parse_version(version)
    return EngineFacts(program, version, frozenset(f for f in flags if flag_in_release(f, v)), None)


def read_facts(program: Path) -> EngineFacts:
    """The facts of ``program`` (a ``vllm`` executable), from the cache when still current."""
    cache = _cache_file(program)
    if cache.is_file():
        data = json.loads(cache.read_text())
        env = None if data["env"] is None else frozenset(data["env"])
        return EngineFacts(data["program"], data["version"], frozenset(data["flags"]), env)
    facts = EngineFacts(str(program), _version(program), _flags(program), _env(program))
    cache.parent.mkdir(parents=True, exist_ok=True)
    env_list = None if facts.env is None else sorted(facts.env)
    cache.write_text(json.dumps({**asdict(facts), "flags": sorted(facts.flags), "env": env_list}))
    return facts


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


def _version(program: Path) -> str:
    lines = _run([str(program), "--version"]).strip().splitlines()
    return lines[-1].strip() if lines else ""


def _flags(program: Path) -> frozenset[str]:
    flags = parse_help(_run([str(program), "serve", "--help=all"]))
    if "--max-num-seqs" not in flags:
        raise TunerError(f"{program} serve --help=all lists no --max-num-seqs: not a vLLM")
    return flags


def _env(program: Path) -> frozenset[str] | None:
    python = _interpreter(program)
    if python is None:
        return None
    for line in _run([python, "-c", _ENV_SCRIPT]).splitlines():
        if line.startswith("TUNE-ENV "):
            return frozenset(json.loads(line[len("TUNE-ENV ") :]))
    return None


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


def _cache_file(program: Path) -> Path:
    stat = program.stat()
    key = f"{program.resolve()}|{stat.st_mtime_ns}|{stat.st_size}"
    root = Path(os.environ.get("TUNE_CACHE_DIR") or Path.home() / ".cache" / "tune")
    return root / "engine-facts" / (hashlib.sha256(key.encode()).hexdigest()[:20] + ".json")
