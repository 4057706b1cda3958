"""The quality gate on the real vLLM CPU build (0.32.0): an FP8 KV cache against vLLM's own
``auto``, a lossless scheduler change, and the user's own evaluation command gating a pick.

Three short studies of two launches each (the baseline, then the one other value of the one
tuned knob), every server --enforce-eager, one tier of 4 requests: about 4 minutes here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from objectives.objective import get_objective
from tests.launchers.helpers import free_port
from tests.vllm_cpu import REPO, make_model, require_venv
from tuner.record.trial import TrialRecord
from tuner.run.study import RunOptions, run_study
from tuner.score.eligible import Eligible, Policy
from tuner.score.pooling import configs
from tuner.score.quality import Gate, config_quality
from tuner.score.recommend import recommend

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

SPACE = REPO / "search_spaces" / "vllm_cpu.yaml"
P99 = get_objective("p99_tpot")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The small preset dies with SIGILL in vLLM 0.32's CPU kernels here (worker exit -4).
    return make_model(tmp_path_factory.mktemp("vllm") / "llama-8x512", preset="default")


def one_knob_study(
    tmp: Path,
    model: Path,
    name: str,
    knob: str,
    values: list[Any],
    quality: dict[str, Any],
    trials: int = 2,
) -> list[optuna.trial.FrozenTrial]:
    """The shipped space reduced to ``knob`` over ``values`` (the first its default): the
    baseline, then the other value (a grid of two)."""
    space: dict[str, Any] = yaml.safe_load(SPACE.read_text())
    param = {**space["parameters"][knob], "choices": values, "default": values[0]}
    param["unset"] = values[0]
    space["engine"].update(
        model=str(model),
        command=[str(require_venv() / "bin" / "vllm"), "serve", "{model}"],
        port=free_port(),
    )
    space["base"]["args"]["enforce-eager"] = True
    space["base"]["args"].pop("speculative-config")  # used only with num_speculative_tokens
    space["parameters"] = {knob: param, "kv_cache_space": space["parameters"]["kv_cache_space"]}
    space["parameters"]["kv_cache_space"]["choices"] = ["1"]
    space.update(rules=[], slos=[], quality=quality)
    space["workload"].update(num_prompts=4, warmup=1, tiers=[1])
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    opts = RunOptions(path, trials=trials, results_dir=tmp / "r", confirm=0, sampler="grid")
    run_study(opts, report=lambda _: None)
    url = f"sqlite:///{tmp / 'r' / name / 'study.db'}"
    return optuna.load_study(study_name=name, storage=url).get_trials()


def launches(trials: list[optuna.trial.FrozenTrial]) -> tuple[TrialRecord, TrialRecord]:
    records = [r for r in map(TrialRecord.of, trials) if r.is_measurement]
    base = next(r for r in records if r.baseline)
    other = next(r for r in records if not r.baseline)
    return base, other


def test_fp8_kv_cache_agreement_gates_the_pick_and_a_lossless_knob_agrees_exactly(
    model: Path, tmp_path: Path
) -> None:
    trials = one_knob_study(
        tmp_path, model, "kv", "kv_cache_dtype", ["auto", "fp8"], {"min_agreement": 0.95}
    )
    base, fp8 = launches(trials)
    assert fp8.params["kv_cache_dtype"] == "fp8" and fp8.answers and base.answers
    assert len(fp8.answers) == 8 and all(len(a) == 16 for a in fp8.answers)
    assert all(isinstance(t, int) for a in fp8.answers for t in a)  # vLLM's own token ids
    groups = list(configs(trials).values())
    base_c = next(c for c in groups if c.is_baseline)
    fp8_c = next(c for c in groups if not c.is_baseline)
    q = config_quality(fp8_c, base_c, Gate(on=True, floor=0.0))
    assert q.agreement is not None and q.value is not None
    print(f"fp8 against auto: {q.words()}")
    assert q.value < 1.0  # an FP8 KV cache changes some greedy token here

    # Above its agreement, it is lower quality: never the pick, whatever its speed.
    above = Policy(gate=Gate(on=True, floor=min(1.0, q.value + 1e-6)))
    pool = Eligible.at(groups, 1, above)
    assert fp8_c in pool.lower_quality and fp8_c not in pool.configs
    assert recommend(trials, P99, [1], above)[0].trial == base.number
    # Below it, it may be.
    below = Policy(gate=Gate(on=True, floor=q.value - 1e-6))
    pool = Eligible.at(groups, 1, below)
    assert fp8_c in pool.configs and not pool.lower_quality
    # What the run itself told the sampler, at the space's floor of 0.95.
    assert fp8.lower_quality == (q.value < 0.95)
    assert fp8.times is not None and (fp8.times.quality_s or 0) > 0

    seqs = one_knob_study(tmp_path, model, "seqs", "max_num_seqs", [128, 16], {})
    base, fewer = launches(seqs)
    assert fewer.params["max_num_seqs"] == 16
    assert fewer.answers == base.answers  # scheduler limits change no greedy answer


def test_the_users_evaluation_command_gates_the_pick(model: Path, tmp_path: Path) -> None:
    gold = tmp_path / "gold.json"
    script = str(REPO / "scripts" / "answer_eval.py")
    url_model = ["--url", "{url}", "--model", "{model}", "--gold", str(gold)]
    # The gold answers: what vLLM's defaults answer, as a reference deployment would give them.
    quality: dict[str, Any] = {
        "min_agreement": 0.9999,
        "command": {
            "argv": [sys.executable, script, *url_model],
            "score": "token_match: ([0-9.]+)",
        },
    }
    writer = {"min_agreement": 0.0, "command": {"argv": [*quality["command"]["argv"]]}}
    writer["command"]["argv"].append("--write-gold")
    writer["command"]["score"] = "wrote (\\d+) gold"
    one_knob_study(tmp_path, model, "gold", "kv_cache_dtype", ["auto", "fp8"], writer, trials=1)
    assert gold.is_file()

    trials = one_knob_study(tmp_path, model, "cmd", "kv_cache_dtype", ["auto", "fp8"], quality)
    base, fp8 = launches(trials)
    assert base.quality_score == 1.0  # the defaults answer as the gold
    assert fp8.quality_score is not None and fp8.quality_score < 0.9999
    print(f"fp8's token_match against the gold: {fp8.quality_score}")
    assert fp8.lower_quality and fp8.failure is not None and "score" in fp8.failure
    rec = recommend(trials, P99, [1], Policy(gate=Gate(on=True, floor=0.9999, scored=True)))[0]
    assert rec.trial == base.number
