"""``tune bench``'s run: the benchmark under a progress bar, then its table, verdicts and JSON."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from objectives.endpoint import Endpoint
from objectives.records import RequestRecord
from objectives.result import TierResult
from objectives.runner import partial_results, run_benchmark
from objectives.vocab import with_vocab
from objectives.workload import WorkloadSpec
from tuner.benchmark import Replay, slo_verdicts
from tuner.cli.bench_table import failure_lines, note_lines, summary_table
from tuner.errors import BenchIncomplete, InfraError, LaunchError, TunerError
from tuner.run.signals import sigterm_as_interrupt


def check_reachable(url: str, timeout_s: float = 5.0) -> None:
    """Refuse, in one line, a server nobody answers at (before any tier is sent)."""
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.host, port), timeout=timeout_s).close()
    except ConnectionRefusedError:
        raise TunerError(f"the server refused the connection at {url}; is it running?") from None
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise TunerError(f"cannot reach the server at {url}: {why}") from None


def write_json(
    path: Path, endpoint: Endpoint, spec: WorkloadSpec, results: list[TierResult]
) -> None:
    doc = {
        "model": endpoint.model,
        "base_url": endpoint.base_url,
        "workload": spec.model_dump(mode="json"),
        "tiers": [r.to_dict() for r in results],
    }
    path.write_text(json.dumps(doc, indent=2) + "\n")


def check_json_out(path: Path) -> None:
    """Refuse, in one line, a ``--json`` file whose folder is missing or cannot be written."""
    folder = path.parent
    if not folder.is_dir():
        raise TunerError(f"--json {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise TunerError(f"--json {path}: the folder {folder} cannot be written")


def run_bench(
    endpoint: Endpoint,
    spec: WorkloadSpec,
    json_out: Path | None,
    progress: bool = True,
    workers: int = 1,
    replay: Replay | None = None,
) -> int:
    """Run the benchmark with a progress bar, print the table, write JSON; 0 when clean.

    Raises:
        TunerError: nobody answers at ``endpoint.base_url`` (before any tier is sent).
        BenchIncomplete: after printing and writing everything, when a tier had failed
            requests or a saturated client.
    """
    if json_out is not None:
        check_json_out(json_out)  # now, not after the whole benchmark
    spec = with_vocab(spec, endpoint)  # the JSON then shows the token-id bound used
    if endpoint.base_url is not None:
        check_reachable(endpoint.base_url)
    console = Console(stderr=True)
    with _progress(console, progress) as bar:
        task = bar.add_task("warm-up", total=spec.requests_per_tier)

        def on_tier(result: TierResult) -> None:
            bar.reset(task, total=spec.requests_per_tier)
            tput = result.metrics.get("output_throughput")
            bar.console.print(
                f"tier {result.concurrency}: {result.metrics['completed']} ok, "
                + ("throughput not measured" if tput is None else f"{tput:.1f} tok/s")
            )

        def on_request(_: RequestRecord) -> None:
            bar.update(task, advance=1, description="measuring")

        try:
            with sigterm_as_interrupt():  # a scheduler's stop keeps the tiers as Ctrl-C does
                results = run_benchmark(
                    endpoint,
                    spec,
                    slos=replay.slos if replay else (),
                    on_tier=on_tier,
                    on_request=on_request,
                    base_dir=replay.base_dir if replay else None,
                    client_workers=workers,
                )
        except (KeyboardInterrupt, LaunchError, InfraError) as exc:
            if json_out is not None:
                write_json(json_out, endpoint, spec, partial_results(exc))
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise BenchIncomplete(f"the server hung: {exc}") from None  # (objectives.stall)
    out = Console()
    if not out.is_terminal:
        out = Console(width=160)  # a file or pipe gets the whole table, not 80 columns
    out.print(summary_table(results))
    verdicts = slo_lines(replay, results) if replay else []
    for line in [*failure_lines(results), *note_lines(results), *verdicts]:
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    if json_out is not None:
        write_json(json_out, endpoint, spec, results)
    failed = [str(r.concurrency) for r in results if r.has_failures]
    saturated = [str(r.concurrency) for r in results if r.client_saturated]
    if failed or saturated:
        parts = [f"failed requests at tiers {','.join(failed)}"] if failed else []
        parts += [f"client saturated at tiers {','.join(saturated)}"] if saturated else []
        raise BenchIncomplete("; ".join(parts))
    return 0


def slo_lines(replay: Replay, results: list[TierResult]) -> list[str]:
    """``c4: SLOs hold (p99_ttft_ms <= 400)`` or ``c16: SLOs missed: p99_ttft_ms 812 > 600``."""
    lines = []
    for v in slo_verdicts(results, replay.slos):
        if not v.slos:
            lines.append(f"c{v.concurrency}: no SLO of {replay.source} applies")
        elif v.held:
            lines.append(f"c{v.concurrency}: SLOs hold ({', '.join(v.slos)})")
        else:
            lines.append(f"c{v.concurrency}: SLOs missed: {'; '.join(v.missed)}")
    return lines


def _progress(console: Console, enabled: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not enabled,
        transient=True,
    )
