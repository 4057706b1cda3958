"""How many token events per second a benchmark client can take, and how true its ITL stays.

Each client runs, in its own process, against a fresh paced server (bench/pacing_server.py:
every stream gets a token every ``--itl-ms``, and the server stamps every write, so it knows the
pacing it really delivered). For 64, 256 and 1024 concurrent streams it prints, per client:

- events/s: token events the server delivered per second while that client ran (vs ideal);
- CPU ms / 1K events: the client's CPU (its whole process tree) per thousand events, which
  contention from other processes on the machine does not change;
- ITL error: the client's per-chunk ITL percentile minus the server's true per-gap percentile
  (peers that only report per-request figures show "-");
- TPOT error: the client's per-request mean-gap percentile (vLLM TPOT; guidellm and aiperf call
  it ITL) minus the server's true per-request mean gap.

Our client is ``python -m tuner bench`` (``tune x2``: two client processes, ``--workers 2``,
from 256 streams); the peer is guidellm from PyPI in its own venv:
``python -m venv .cache/peer && .cache/peer/bin/pip install guidellm==0.8.1``.
Usage: ``python -m bench.client_capacity [--concurrency 64,256,1024] [--itl-ms 25]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / ".cache" / "peer" / "bin" / "guidellm"
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Row:
    client: str
    streams: int
    events_s: float = 0.0
    cpu_ms_per_1k: float = 0.0
    itl_err: tuple[float, float] | None = None
    tpot_err: tuple[float, float] | None = None
    completed: int = 0
    errors: int = 0
    note: str = ""


class PacedServer:
    """bench/pacing_server.py in its own process, one per client run."""

    def __init__(self, itl_ms: float) -> None:
        cmd = [sys.executable, "-m", "bench.pacing_server", "--port", "0"]
        cmd += ["--itl-ms", str(itl_ms), "--ttft-ms", "50", "--max-seconds", "600"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline().split()[1])}"

    def stats(self, path: str = "/stats") -> dict[str, float]:
        with urllib.request.urlopen(self.url + path, timeout=30) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and every live descendant (worker processes included)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = fields
            children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        if p in stats:
            total += (int(stats[p][11]) + int(stats[p][12])) / TICK
        todo.extend(children.get(p, []))
    return total


def watch_cpu(proc: subprocess.Popen[bytes], server: PacedServer) -> tuple[float, float]:
    """CPU the client tree used between the first and the last token event it received."""
    marks: list[tuple[float, float]] = []  # (events, cpu) samples while events flow
    while proc.poll() is None:
        events = server.stats("/count")["events"]
        cpu = tree_cpu_s(proc.pid)
        if events and (not marks or events > marks[-1][0]):
            marks.append((events, cpu))
        time.sleep(0.25)
    if len(marks) < 2:
        return 0.0, 0.0
    return marks[-1][0] - marks[0][0], marks[-1][1] - marks[0][1]


def run_client(name: str, cmd: list[str], server: PacedServer, row: Row) -> None:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))  # type: ignore[union-attr]
    reader.start()
    events, cpu = watch_cpu(proc, server)
    proc.wait()
    reader.join()
    if events:
        row.cpu_ms_per_1k = cpu * 1e6 / events
    if proc.returncode not in (0, 1):
        row.note = f"{name} exited {proc.returncode}: {err[0][-300:].decode(errors='replace')}"


def ours(
    streams: int, args: argparse.Namespace, server: PacedServer, *, out: Path, workers: int = 1
) -> Row:
    row = Row("tune" if workers == 1 else f"tune x{workers}", streams)
    cmd = [
        sys.executable,
        "-m",
        "tuner",
        "bench",
        "--url",
        server.url,
        "--model",
        "paced",
        "--concurrency",
        str(streams),
        "--num-prompts",
        str(streams * args.rounds),
        "--random-input-len",
        "16",
        "--random-output-len",
        str(args.output_len),
        "--warmup",
        "0",
        "--json",
        str(out),
        "--no-progress",
        "--workers",
        str(workers),
    ]
    run_client("tune bench", cmd, server, row)
    truth = server.stats()
    row.events_s = truth["event_rate"]
    if out.exists():
        (tier,) = json.loads(out.read_text())["tiers"]
        row.itl_err = (
            tier["median_itl_ms"] - truth["itl_ms_p50"],
            tier["p99_itl_ms"] - truth["itl_ms_p99"],
        )
        row.tpot_err = (
            tier["median_tpot_ms"] - truth["tpot_ms_p50"],
            tier["p99_tpot_ms"] - truth["tpot_ms_p99"],
        )
        row.completed, row.errors = tier["completed"], tier["failed"]
        if tier["client_saturated"]:
            row.note = "flagged client-saturated"
    return row


def guidellm(streams: int, args: argparse.Namespace, server: PacedServer, *, work: Path) -> Row:
    row = Row("guidellm", streams)
    data = work / f"data-{streams}.jsonl"
    with data.open("w") as f:
        for i in range(streams * args.rounds):
            f.write(
                json.dumps(
                    {
                        "prompt": f"request {i} " + "word " * 14,
                        "output_tokens_count": args.output_len,
                    }
                )
                + "\n"
            )
    out = work / f"guidellm-{streams}.json"
    cmd = [
        str(PEER),
        "run",
        "--backend",
        f"kind=openai_http,target={server.url},model=paced",
        "--profile",
        f"kind=concurrent,streams={streams}",
        "--data",
        f"kind=json_file,path={data}",
        "--constraint",
        f"kind=max_requests,count={streams * args.rounds}",
        "--output",
        f"kind=json,path={out}",
        "--disable-console",
    ]
    run_client("guidellm", cmd, server, row)
    truth = server.stats()
    row.events_s = truth["event_rate"]
    if out.exists():
        metrics = json.loads(out.read_text())["benchmarks"][0]["metrics"]
        itl = metrics["inter_token_latency_ms"]["successful"]  # per request: vLLM's TPOT
        row.tpot_err = (
            itl["percentiles"]["p50"] - truth["tpot_ms_p50"],
            itl["percentiles"]["p99"] - truth["tpot_ms_p99"],
        )
        totals = metrics["request_totals"]
        row.completed, row.errors = int(totals["successful"]), int(totals["errored"])
    return row


def fmt_err(pair: tuple[float, float] | None) -> str:
    return "-" if pair is None else f"{pair[0]:+7.2f} {pair[1]:+7.2f}"


def report(rows: list[Row], args: argparse.Namespace) -> None:
    print(
        f"{'streams':>7} {'client':<9} {'events/s':>9} {'ideal/s':>8} {'CPU ms/1K':>9} "
        f"{'ITL err p50 p99 ms':>18} {'TPOT err p50 p99':>17} {'ok':>5} {'err':>4}  note"
    )
    for r in rows:
        ideal = r.streams * 1000 / args.itl_ms
        print(
            f"{r.streams:>7} {r.client:<9} {r.events_s:>9.0f} {ideal:>8.0f} "
            f"{r.cpu_ms_per_1k:>9.1f} {fmt_err(r.itl_err):>18} {fmt_err(r.tpot_err):>17} "
            f"{r.completed:>5} {r.errors:>4}  {r.note}"
        )
    by = {(r.client, r.streams): r for r in rows}
    for streams in args.concurrency:
        mine, peer = by.get(("tune", streams)), by.get(("guidellm", streams))
        if mine and peer and peer.events_s and peer.cpu_ms_per_1k:
            print(
                f"{streams:>7} ratio tune/guidellm: events/s {mine.events_s / peer.events_s:.2f}"
                f"  CPU per event {mine.cpu_ms_per_1k / peer.cpu_ms_per_1k:.2f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="64,256,1024")
    ap.add_argument("--itl-ms", type=float, default=25.0)
    ap.add_argument("--output-len", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1, help="requests per stream")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--workers", default="1,2", help="our client's process counts to run")
    ap.add_argument(
        "--multi-from",
        type=int,
        default=256,
        help="several of our processes only from this many streams",
    )
    args = ap.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.workers = [int(w) for w in args.workers.split(",")]
    peer = not args.no_peer and PEER.exists()
    if not args.no_peer and not PEER.exists():
        print(f"peer client missing ({PEER}); install it as the docstring says", file=sys.stderr)
    load0 = os.getloadavg()[0]
    print(
        f"paced server: {args.itl_ms} ms/token, {args.output_len} tokens/request, "
        f"{args.rounds} requests/stream; {os.cpu_count()} CPUs, load avg {load0:.1f}"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for streams in args.concurrency:
            runs: list[Callable[[PacedServer], Row]] = [
                partial(ours, streams, args, out=Path(tmp) / f"tune-{streams}-{w}.json", workers=w)
                for w in args.workers
                if w == 1 or streams >= args.multi_from
            ]
            if peer:
                runs.append(partial(guidellm, streams, args, work=Path(tmp)))
            for run in runs:
                server = PacedServer(args.itl_ms)
                try:
                    rows.append(run(server))
                finally:
                    server.stop()
                print(f"  done: {rows[-1].client} at {streams} streams", file=sys.stderr)
    report(rows, args)
    print(f"load avg after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
