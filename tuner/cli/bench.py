"""``tune bench``: the trial benchmark on its own, against any running OpenAI-compatible server.

Exit codes: 0 when every tier completed cleanly; 1 when a tier had failed requests or the
client saturated (its numbers are then not the server's; the table and JSON are still written),
or the server hung (the tiers completed are written to ``--json``); 2 for a usage error; 130 on
Ctrl-C or SIGTERM, after writing the tiers completed so far to ``--json``.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from objectives.datasets import DATASET_KINDS as DATASETS
from objectives.endpoint import Endpoint
from objectives.records import RequestRecord
from objectives.result import TierResult
from objectives.runner import partial_results, run_benchmark
from objectives.vocab import with_vocab
from objectives.workload import STALL_FLOOR_S, WorkloadSpec
from tuner.cli.bench_table import failure_lines, note_lines, summary_table
from tuner.cli.root import app
from tuner.errors import BenchIncomplete, InfraError, LaunchError, TunerError
from tuner.run.signals import sigterm_as_interrupt


def parse_tiers(text: str) -> list[int]:
    """``"1,8,32"`` -> ``[1, 8, 32]``; anything else is a one-line user error."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise TunerError(f"--concurrency must be comma-separated integers, got {text!r}") from None


def check_url(url: str) -> str:
    """``url`` when it is an http(s) URL with a host; else a one-line user error."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise TunerError(
            f"--url must be an http:// or https:// URL with a host, e.g. "
            f"http://127.0.0.1:8000 (got {url!r})"
        )
    return url


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


def bench_workload(opts: dict[str, Any]) -> WorkloadSpec:
    """The ``WorkloadSpec`` the flags describe (same validation as a space file's workload)."""
    kind = opts["dataset"]
    ids = {"vocab_size": opts.get("vocab_size")}  # token-id datasets only
    datasets: dict[str, dict[str, Any]] = {
        "random": {
            "input_len": opts["input_len"],
            "output_len": opts["output_len"],
            "range_ratio": opts["range_ratio"],
            "prefix_len": opts["prefix_len"],
            **ids,
        },
        "sharegpt": {"path": opts["dataset_path"], "output_len": opts["fixed_output_len"]},
        "prefix_repetition": {
            "num_prefixes": opts["num_prefixes"],
            "repeats": opts["repeats"],
            "prefix_len": opts["prefix_len"] or opts["input_len"],
            "suffix_len": opts["suffix_len"],
            "output_len": opts["output_len"],
            **ids,
        },
        "code_edit": {  # files of --input-len, --num-prefixes of them, --repeats edits each
            "num_files": opts["num_prefixes"],
            "file_len": opts["input_len"],
            "range_ratio": opts["range_ratio"],
            "edits": opts["repeats"],
            "request_len": opts["suffix_len"],
            "output_len": opts["output_len"],
            **ids,
        },
        "long_prompt": {"input_len": opts["input_len"], "output_len": opts["output_len"], **ids},
    }
    if kind not in datasets:
        raise TunerError(f"--dataset {kind!r} is not one of {', '.join(DATASETS)}")
    if kind == "sharegpt" and opts["dataset_path"] is None:
        raise TunerError("--dataset sharegpt needs --dataset-path FILE")
    body = {
        "dataset": {"kind": kind, **datasets[kind]},
        "num_prompts": opts["num_prompts"],
        "warmup": opts["warmup"],
        "tiers": parse_tiers(opts["concurrency"]),
        "request_rate": opts["request_rate"],
        "burstiness": opts["burstiness"],
        "seed": opts["seed"],
        "endpoint": opts["endpoint"],
        "request_timeout_s": opts["timeout"],
        "stall_floor_s": opts.get("stall_floor", STALL_FLOOR_S),
        "tokenizer": opts.get("tokenizer"),
        "steady_state": opts.get("steady_state", False),
    }
    try:
        return WorkloadSpec.model_validate(body)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "workload"
        raise TunerError(f"invalid benchmark options: {where}: {first['msg']}") from None


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
                    endpoint, spec, on_tier=on_tier, on_request=on_request, client_workers=workers
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
    for line in [*failure_lines(results), *note_lines(results)]:
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


@app.command("bench")
def bench(
    url: str = typer.Option(..., "--url", help="Server base URL, e.g. http://127.0.0.1:8000"),
    model: str = typer.Option(..., "--model", help="Model name the server serves."),
    concurrency: str = typer.Option("1,8,32", help="Comma-separated concurrency tiers."),
    dataset: str = typer.Option(
        "random", help="random | sharegpt | prefix_repetition | long_prompt"
    ),
    dataset_path: Annotated[
        Path | None, typer.Option(help="ShareGPT-style JSON / JSONL file.")
    ] = None,
    input_len: int = typer.Option(1024, help="Prompt tokens (random, long_prompt)."),
    output_len: int = typer.Option(128, help="Output tokens (max_tokens with ignore_eos)."),
    fixed_output_len: int | None = typer.Option(None, help="sharegpt: fixed output length."),
    range_ratio: float = typer.Option(0.0, help="random: length spread, as vllm."),
    prefix_len: int = typer.Option(0, help="Shared prefix tokens (random, prefix_repetition)."),
    suffix_len: int = typer.Option(0, help="prefix_repetition: per-request suffix tokens."),
    num_prefixes: int = typer.Option(1, help="prefix_repetition: distinct prompts."),
    repeats: int = typer.Option(1, help="prefix_repetition: sends of each prompt."),
    num_prompts: int | None = typer.Option(None, help="Measured requests per tier."),
    warmup: int = typer.Option(1, help="Requests sent first, not measured."),
    request_rate: float | None = typer.Option(None, help="Open-loop requests/s (default off)."),
    burstiness: float = typer.Option(1.0, help="Gamma shape of arrivals (1 = Poisson)."),
    seed: int = typer.Option(0, help="Seed of every random choice."),
    endpoint: str = typer.Option("completions", help="completions | chat"),
    timeout: float = typer.Option(600.0, help="Per-request timeout in seconds."),
    stall_floor: float = typer.Option(
        STALL_FLOOR_S, help="Seconds of silence at least before the server counts as hung."
    ),
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            help="Local HF tokenizer folder or tokenizer.json: random token ids stay inside "
            "its vocabulary (default: the model's folder, else the one /v1/models lists)."
        ),
    ] = None,
    vocab_size: Annotated[
        int | None,
        typer.Option(help="Random token ids are drawn from [100, N) (overrides --tokenizer)."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write per-tier JSON here.")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="OPENAI_API_KEY",
            show_envvar=True,
            show_default=False,
            help="Sent as 'Authorization: Bearer KEY' (a server started with --api-key).",
        ),
    ] = None,
    steady_state: bool = typer.Option(
        False,
        help="TPOT, ITL and throughputs only between each tier's ramp-up and drain "
        "(send at least 3x the concurrency; workload.steady_state).",
    ),
    progress: bool = typer.Option(True, help="Show a progress bar."),
    workers: int = typer.Option(
        1, min=1, help="Client processes per tier (when one cannot keep up; see CPU share)."
    ),
) -> None:
    """Benchmark a running server at each concurrency tier (vllm bench serve's metrics)."""
    opts = dict(locals())
    opts.pop("workers")
    opts.pop("api_key")
    check_url(url)
    if num_prompts is None and dataset in ("random", "sharegpt"):
        opts["num_prompts"] = 200
    spec = bench_workload(opts)
    served = Endpoint(model=model, base_url=url, api_key=api_key or None)
    run_bench(served, spec, json_out, progress, workers)
