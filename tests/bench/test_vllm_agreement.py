"""bench.vllm_agreement: its pure parts on real result files, and one slow run for real.

The fixtures are one real run's files (tests/fixtures/vllm-0.32.0-cpu/agreement_*): the prompt
file both clients read, and each client's result JSON at concurrency 1 and 4.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import agreement_prompts as ap
from bench import agreement_table as at
from bench import vllm_agreement as va
from bench import vllm_server as vs
from objectives.datasets import build_requests
from objectives.records import BenchRequest
from objectives.workload import WorkloadSpec
from tests.vllm_cpu import REPO, make_model, require_venv

FIXTURES = REPO / "tests" / "fixtures" / "vllm-0.32.0-cpu"


def words(text: str) -> int:
    """A stand-in tokenizer: one token per word."""
    return len(text.split())


def tune_reads(path: Path, n: int, output_len: int = 32) -> list[BenchRequest]:
    """The measured requests tune builds from a ShareGPT file (its own loader)."""
    dataset = {"kind": "sharegpt", "path": str(path), "output_len": output_len}
    spec = WorkloadSpec.model_validate(
        {"dataset": dataset, "num_prompts": n, "tiers": [1], "endpoint": "completions"}
    )
    return list(build_requests(spec))


def fixture_runs(tier: int) -> list[Any]:
    """Both clients' real results at ``tier`` as runs of the script (one repeat each)."""
    runs = []
    for client, name in (("tune", "agreement_tune_bench"), ("vllm", "agreement_bench_serve")):
        metrics = at.read_result(FIXTURES / f"{name}_c{tier}.json", client)
        runs.append(at.Run(client, tier, 0, metrics=metrics))
    return runs


# ---------------------------------------------------------------- the prompt file


def test_compose_adds_up_to_the_target_exactly() -> None:
    costs = {" a": 1, " bb": 2, " cccc": 4}
    for target in range(1, 60):
        text = ap.compose(costs, target, random.Random(target))
        assert sum(costs[" " + w] for w in text.split()) == target


def test_compose_is_seeded() -> None:
    costs = ap.word_costs(lambda w: len(w) - 1)  # " a": 1 token
    first = ap.compose(costs, 128, random.Random(3))
    assert first == ap.compose(costs, 128, random.Random(3))
    assert first != ap.compose(costs, 128, random.Random(4))


def test_compose_without_a_short_enough_word_says_so() -> None:
    with pytest.raises(ValueError, match="no word of at most 1 tokens"):
        ap.compose({" bb": 2}, 3, random.Random(0))


def test_word_costs_count_each_word_with_its_leading_space() -> None:
    seen: list[str] = []
    costs = ap.word_costs(lambda w: seen.append(w) or len(w), ("the", "a"))
    assert costs == {" the": 4, " a": 2} and seen == [" the", " a"]


def test_prompt_file_is_read_by_tune_once_each_with_the_servers_count(tmp_path: Path) -> None:
    path = tmp_path / "prompts.json"
    counts = ap.write_prompt_file(path, words, 16, 128, 32, seed=0)
    assert counts == [128] * 16
    requests = tune_reads(path, 16)
    entries = json.loads(path.read_text())
    # vLLM's loader takes conversations[0]["value"] of entries with at least two turns.
    prompts = [e["conversations"][0]["value"] for e in entries if len(e["conversations"]) >= 2]
    assert sorted(r.prompt for r in requests) == sorted(prompts)
    assert len(set(prompts)) == 16
    assert {(r.prompt_len, r.output_len) for r in requests} == {(128, 32)}


def test_the_real_prompt_file_gives_tune_the_servers_token_counts() -> None:
    requests = tune_reads(FIXTURES / "agreement_prompts.json", 16)
    assert {r.prompt_len for r in requests} == {128}
    vllm = json.loads((FIXTURES / "agreement_bench_serve_c1.json").read_text())
    assert vllm["total_input_tokens"] == 16 * 128  # the server's usage.prompt_tokens


@pytest.mark.parametrize(
    ("input_len", "output_len", "ok"),
    [(4, 32, True), (1024, 1024, True), (3, 32, False), (1025, 32, False), (1024, 1025, False)],
)
def test_lengths_vllms_sharegpt_loader_would_drop_are_refused(
    input_len: int, output_len: int, ok: bool
) -> None:
    if ok:
        ap.check_lengths(input_len, output_len)
    else:
        with pytest.raises(SystemExit):
            ap.check_lengths(input_len, output_len)


# ---------------------------------------------------------------- results and verdicts


def test_read_result_takes_vllms_top_level_keys_and_tunes_one_tier() -> None:
    vllm = at.read_result(FIXTURES / "agreement_bench_serve_c4.json", "vllm")
    tune = at.read_result(FIXTURES / "agreement_tune_bench_c4.json", "tune")
    raw = json.loads((FIXTURES / "agreement_bench_serve_c4.json").read_text())
    assert vllm["median_tpot_ms"] == raw["median_tpot_ms"]
    for result in (vllm, tune):
        assert set(at.SHOWN) <= set(result)
        assert (result["completed"], result["failed"]) == (16, 0)
        assert (result["total_input_tokens"], result["total_output_tokens"]) == (2048, 512)


def test_verdicts_of_the_real_results() -> None:
    found = at.verdicts(fixture_runs(1), 1)
    assert set(found) == set(at.SHOWN)  # no server_* figures in the result files
    tune = at.read_result(FIXTURES / "agreement_tune_bench_c1.json", "tune")
    vllm = at.read_result(FIXTURES / "agreement_bench_serve_c1.json", "vllm")
    for key, v in found.items():
        assert v.ratio == pytest.approx(tune[key] / vllm[key])
        assert v.agree == (abs(tune[key] / vllm[key] - 1) <= 0.02)
        assert v.beyond_spread == (tune[key] != vllm[key])  # one repeat: no spread


def test_verdict_agreement_and_spread() -> None:
    close = at.Verdict((100.0, 101.0, 104.0), (100.5, 101.5, 103.0))
    assert close.ratio == pytest.approx(101.0 / 101.5)
    assert close.agree and not close.beyond_spread
    apart = at.Verdict((10.0, 11.0), (12.0, 13.0))
    assert not apart.agree and apart.beyond_spread
    noisy = at.Verdict((10.0, 14.0, 20.0), (11.0, 12.0, 13.0))  # 14 vs 12: differ, overlapping
    assert not noisy.agree and not noisy.beyond_spread


def test_tier_table_shows_both_clients_and_what_they_sent() -> None:
    lines = at.tier_table(fixture_runs(4), 4)
    assert lines[0] == "concurrency 4: median [min - max] over 1 repeats"
    rows = {line.split()[0]: line for line in lines[2 : 2 + len(at.SHOWN)]}
    assert set(rows) == set(at.SHOWN)
    assert all(("agree within 2%" in r) or ("DIFFER by" in r) for r in rows.values())
    assert "completed/failed [(16, 0)], prompt/output tokens [(2048, 512)]" in lines[-1]


def test_histograms_of_a_real_metrics_page() -> None:
    text = (FIXTURES / "metrics_under_load.txt").read_text()
    totals = vs.histogram_totals(text)
    ttft = "vllm:time_to_first_token_seconds"
    lines = [line for line in text.splitlines() if line.startswith(f"{ttft}_count")]
    assert totals[f"{ttft}_count"] == sum(float(line.split()[-1]) for line in lines) > 0
    means = vs.server_means(dict.fromkeys(totals, 0.0), totals)
    assert means["server_mean_ttft_ms"] == pytest.approx(
        totals[f"{ttft}_sum"] / totals[f"{ttft}_count"] * 1000
    )
    assert vs.server_means(totals, totals) == {}  # nothing finished in between


def test_run_notes() -> None:
    clean = {"failed": 0.0}
    assert at.Run("vllm", 1, 0, metrics=clean).ok
    saturated = at.Run("tune", 1, 0, metrics={**clean, "client_saturated": 1.0}, rc=1)
    assert saturated.ok and saturated.note == "tune flagged client-saturated"
    missing = at.Run("vllm", 1, 0, rc=2)
    assert not missing.ok and missing.note == "exit 2, no result"
    failed = at.Run("tune", 1, 0, metrics={"failed": 3.0}, rc=1)
    assert not failed.ok and failed.note == "exit 1, 3 failed"


def test_interleaved_alternates_who_runs_first() -> None:
    assert va.interleaved(3) == [
        (0, ("tune", "vllm")),
        (1, ("vllm", "tune")),
        (2, ("tune", "vllm")),
    ]


def test_both_clients_get_the_same_workload() -> None:
    args = va.parse_args(["--num-prompts", "8", "--output-len", "16"])
    prompts, out = Path("p.json"), Path("/tmp/r.json")
    tune = va.tune_cmd("http://h:1", "4", prompts, args, out)
    vllm = va.vllm_cmd("http://h:1", "4", prompts, args, out)
    after = {a: b for a, b in zip(tune, [*tune[1:], ""], strict=True)}
    assert after["--concurrency"] == "4" and after["--num-prompts"] == "8"
    assert after["--sharegpt-output-len"] == "16" and after["--sharegpt-path"] == "p.json"
    flags = {a: b for a, b in zip(vllm, [*vllm[1:], ""], strict=True)}
    assert flags["--max-concurrency"] == "4" and flags["--num-prompts"] == "8"
    assert flags["--sharegpt-output-len"] == "16" and flags["--dataset-path"] == "p.json"
    assert {"--ignore-eos", "--no-oversample"} <= set(vllm)
    assert flags["--extra-body"] == va.GREEDY  # tune's requests are greedy
    default = va.vllm_cmd("http://h:1", "4", prompts, va.parse_args(["--vllm-sampling"]), out)
    assert "--extra-body" not in default


# ---------------------------------------------------------------- for real


def agreement_port() -> int:
    """A free port of this script's range (18461-18469), else any free one."""
    for port in range(18461, 18470):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_one_repeat_on_a_real_vllm(tmp_path: Path) -> None:
    venv = require_venv()
    model = va.MODEL if (va.MODEL / "config.json").exists() else None
    model = model or make_model(tmp_path / "llama-8x512", preset="default")
    out, port = tmp_path / "run", agreement_port()
    cmd = [sys.executable, "-m", "bench.vllm_agreement", "--repeats", "1"]
    cmd += ["--num-prompts", "4", "--concurrency", "1", "--port", str(port)]
    cmd += ["--venv", str(venv), "--model", str(model), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=840)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "concurrency 1: median [min - max] over 1 repeats" in done.stdout
    for key in (*at.SHOWN, *vs.SERVER_HISTOGRAMS):
        assert any(line.startswith(key + " ") for line in done.stdout.splitlines()), key
    vllm = at.read_result(out / "r0-c1-vllm.json", "vllm")
    tune = at.read_result(out / "r0-c1-tune.json", "tune")
    # Both sent the 4 prompts once, 128 tokens each by the server's count, 32 tokens back.
    for result in (vllm, tune):
        assert (result["completed"], result["total_input_tokens"]) == (4, 512)
        assert result["total_output_tokens"] == 128
    # The server is gone with the script: its port closed, no vllm serve on it left.
    assert not vs.port_taken(port) and str(port) not in va.other_servers(0)


def test_parse_args_defaults_are_bounded() -> None:
    args: argparse.Namespace = va.parse_args([])
    assert (args.tiers, args.repeats, args.num_prompts) == ([1, 4], 3, 16)
    assert (args.input_len, args.output_len, args.port) == (128, 32, 18460)
    assert not args.compile and not args.prefix_caching
