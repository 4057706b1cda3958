"""A launch's quality checks, after its tiers and on the same engine: the probe answers and,
where the space names one, the user's own evaluation command and its score.

What they cost goes to the trial's ``TrialTimes.quality_s`` (where the hours went). Both are
stored with the trial (``TrialOutcome.answers`` / ``quality_score``); how they compare with the
baseline's is scoring's business (``tuner.score.quality``).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optuna.trial import FrozenTrial

from objectives.endpoint import Endpoint
from objectives.probes import answer_probes, probe_set
from objectives.vocab import with_vocab
from objectives.workload import WorkloadSpec
from tuner.errors import InfraError
from tuner.record.trial import QUALITY, TrialOutcome, TrialRecord
from tuner.score.quality import Gate, judge
from tuner.space.quality import QualityCommand, QualitySpec
from tuner.storage.results import write_json

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_OUTPUT_SHOWN = 400  # characters of a failed command's output an error carries


@dataclass
class QualityRun:
    """What a launch's quality checks gave."""

    answers: list[Any]
    score: float | None = None
    seconds: float = 0.0


def check_quality(
    endpoint: Endpoint,
    spec: QualitySpec,
    workload: WorkloadSpec,
    trial_dir: Path,
    base_dir: Path | None,
) -> QualityRun:
    """Answer the probes, run the command (not on a virtual engine: nothing to point it at),
    write ``answers.json`` beside the tiers' files."""
    started = time.monotonic()
    # The benchmark's own vocabulary bound: probe ids are the served model's tokens.
    vocab = getattr(with_vocab(workload, endpoint, base_dir).dataset, "vocab_size", None)
    answers = answer_probes(endpoint, probe_set(vocab, spec.probes, spec.max_tokens))
    score = None
    if spec.command is not None and endpoint.base_url is not None:
        score = run_command(spec.command, endpoint, base_dir)
    # On the engine's clock, as every phase: a virtual engine's answers take none of it.
    spent = 0.0 if endpoint.virtual is not None else time.monotonic() - started
    out = QualityRun(list(answers), score, spent)
    write_json(trial_dir / "answers.json", {"answers": out.answers, "score": score})
    return out


def run_command(cmd: QualityCommand, endpoint: Endpoint, cwd: Path | None) -> float:
    """The command's score against ``endpoint``.

    Raises:
        InfraError: it could not start, timed out, exited non-zero or printed no score: the
            evaluation, not the config, is what needs fixing.
    """
    assert endpoint.base_url is not None
    url = endpoint.base_url.rstrip("/")
    argv = [a.replace("{url}", url).replace("{model}", endpoint.model) for a in cmd.argv]
    env = {**os.environ, "TUNE_QUALITY_URL": url, "TUNE_QUALITY_MODEL": endpoint.model}
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=cmd.timeout_s
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise InfraError(f"quality command {argv[0]}: {err}") from err
    output = done.stdout + "\n" + done.stderr
    if done.returncode != 0:
        raise InfraError(
            f"quality command {argv[0]} exited {done.returncode}: {output.strip()[-_OUTPUT_SHOWN:]}"
        )
    score = read_score(output, cmd.score)
    if score is None:
        what = f"nothing matching {cmd.score!r}" if cmd.score else "no number"
        raise InfraError(f"quality command {argv[0]} printed {what}: {output.strip()[-200:]}")
    return score


def read_score(output: str, pattern: str | None) -> float | None:
    """The last match of ``pattern``'s first group (None: the last number) as a float."""
    if pattern is None:
        numbers = _NUMBER.findall(output)
        return float(numbers[-1]) if numbers else None
    matches = list(re.finditer(pattern, output))
    for m in reversed(matches):
        found = _NUMBER.search(m.group(1) or "")
        if found:
            return float(found.group(0))
    return None


def gate_outcome(
    out: TrialOutcome, trials: Sequence[FrozenTrial], gate: Gate, baseline: bool
) -> None:
    """Mark ``out`` lower quality when it answers below the floor, against the baseline's
    first launch among ``trials`` (itself for the baseline): a constraint the sampler learns
    from. Unknown until the baseline answered (another slot may still be running it); the
    exports judge again from the stored answers."""
    if not gate.on or (out.answers is None and out.quality_score is None):
        return
    reference = (out.answers, out.quality_score) if baseline else _baseline(trials)
    q = judge(out.answers, out.quality_score, reference, gate)
    if not q.below or q.value is None:
        return
    out.constraints[QUALITY] = gate.floor - q.value
    why = f"lower quality: {q.words()}, below the floor of {gate.floor:.0%}"
    out.failure = f"{out.failure}; {why}" if out.failure else why
    out.failure_kind = out.failure_kind or QUALITY


def _baseline(trials: Sequence[FrozenTrial]) -> tuple[list[Any] | None, float | None]:
    for r in sorted(map(TrialRecord.of, trials), key=lambda r: r.number):
        if r.baseline and r.is_measurement and r.confirm_of is None and r.answers is not None:
            return r.answers, r.quality_score
    return None, None
