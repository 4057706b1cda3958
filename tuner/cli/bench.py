"""``tune bench``: the trial benchmark on its own, against any running OpenAI-compatible server.

Exit codes: 0 when every tier completed cleanly; 1 when a tier had failed requests or the
client saturated (its numbers are then not the server's; the table and JSON are still written),
or the server hung (the tiers completed are written to ``--json``); 2 for a usage error; 130 on
Ctrl-C or SIGTERM, after writing the tiers completed so far to ``--json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from pydantic import ValidationError

from objectives.datasets import DATASET_KINDS
from objectives.endpoint import Endpoint
from objectives.workload import STALL_FLOOR_S, WorkloadSpec
from tuner.benchmark import Replay, replay_of_space, replay_of_study
from tuner.cli.bench_datasets import SHARED_PANEL, dataset_body, flag_of, with_dataset_options
from tuner.cli.bench_run import run_bench
from tuner.cli.root import app
from tuner.errors import TunerError
from tuner.storage.results import check_study_name


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


def bench_workload(opts: dict[str, Any]) -> WorkloadSpec:
    """The ``WorkloadSpec`` the flags describe (same validation as a space file's workload)."""
    body = {
        "dataset": dataset_body(opts["dataset"], opts),
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
        raise TunerError(
            f"invalid benchmark options: {_where(first['loc'], opts)}: {first['msg']}"
        ) from None


def _where(loc: tuple[int | str, ...], opts: dict[str, Any]) -> str:
    """The flag a validation error is about where one set it, else its place in the workload."""
    if len(loc) == 3 and loc[0] == "dataset":
        flag = flag_of(str(loc[1]), str(loc[2]), opts)
        if flag is not None:
            return flag
    return ".".join(str(p) for p in loc) or "workload"


def _replay(space: Path | None, study: str | None, storage: str | None, results: Path) -> Replay:
    if space is not None and study is not None:
        raise TunerError("--space and --study both name a workload; give one")
    if space is not None:
        return replay_of_space(space)
    assert study is not None
    return replay_of_study(check_study_name(study), storage, results)


_SERVER = "server"
_REPLAY = "replaying a space or study"
_LOAD = "tiers, arrivals and client"


@app.command("bench")
@with_dataset_options
def bench(
    dataset: str = typer.Option(
        "random",
        metavar="KIND",
        help=f"Dataset kind: {', '.join(DATASET_KINDS)}. Each has its own options below.",
        rich_help_panel=SHARED_PANEL,
    ),
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            help="Local HF tokenizer folder or tokenizer.json whose vocabulary bounds random "
            "token ids (default: the model's folder, else the one /v1/models lists).",
            rich_help_panel=SHARED_PANEL,
        ),
    ] = None,
    url: str = typer.Option(
        ...,
        metavar="URL",
        help="Server base URL, e.g. http://127.0.0.1:8000",
        rich_help_panel=_SERVER,
    ),
    model: str = typer.Option(
        None,
        metavar="NAME",
        help="Model name the server serves (default: the space's).",
        rich_help_panel=_SERVER,
    ),
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="OPENAI_API_KEY",
            show_envvar=True,
            show_default=False,
            metavar="KEY",
            help="Sent as 'Authorization: Bearer KEY' (a server started with --api-key).",
            rich_help_panel=_SERVER,
        ),
    ] = None,
    timeout: float = typer.Option(
        600.0, metavar="S", help="Per-request timeout in seconds.", rich_help_panel=_SERVER
    ),
    stall_floor: float = typer.Option(
        STALL_FLOOR_S,
        metavar="S",
        help="Seconds of silence at least before the server counts as hung.",
        rich_help_panel=_SERVER,
    ),
    space: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Replay this space's workload (dataset, tiers, requests, seed) and judge its "
            "SLOs; the dataset and tier options are then not used.",
            rich_help_panel=_REPLAY,
        ),
    ] = None,
    study: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Replay the workload and SLOs this study recorded.",
            rich_help_panel=_REPLAY,
        ),
    ] = None,
    results_dir: Annotated[
        Path,
        typer.Option(
            metavar="DIR",
            help="Where --study's folder is (default storage).",
            rich_help_panel=_REPLAY,
        ),
    ] = Path("results"),
    storage: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="--study's storage URL (default: its results folder).",
            rich_help_panel=_REPLAY,
        ),
    ] = None,
    concurrency: str = typer.Option(
        "1,8,32",
        metavar="N,N,...",
        help="Comma-separated concurrency tiers.",
        rich_help_panel=_LOAD,
    ),
    num_prompts: int | None = typer.Option(
        None,
        metavar="N",
        help="Measured requests per tier (default: 200 for random and sharegpt, the dataset's "
        "own count for the others).",
        rich_help_panel=_LOAD,
    ),
    warmup: int = typer.Option(
        1, metavar="N", help="Requests sent first, not measured.", rich_help_panel=_LOAD
    ),
    request_rate: float | None = typer.Option(
        None, metavar="R", help="Open-loop requests/s (default off).", rich_help_panel=_LOAD
    ),
    burstiness: float = typer.Option(
        1.0, metavar="X", help="Gamma shape of arrivals (1 = Poisson).", rich_help_panel=_LOAD
    ),
    seed: int = typer.Option(
        0, metavar="N", help="Seed of every random choice.", rich_help_panel=_LOAD
    ),
    endpoint: str = typer.Option(
        "completions", metavar="API", help="completions | chat", rich_help_panel=_LOAD
    ),
    steady_state: bool = typer.Option(
        False,
        "--steady-state",
        metavar="",  # a flag: no value to name
        help="TPOT, ITL and throughputs only between each tier's ramp-up and drain "
        "(send at least 3x the concurrency; workload.steady_state).",
        rich_help_panel=_LOAD,
    ),
    json_out: Annotated[
        Path | None,
        typer.Option(
            "--json", metavar="FILE", help="Write per-tier JSON here.", rich_help_panel=_LOAD
        ),
    ] = None,
    progress: bool = typer.Option(
        True, metavar="", help="Show a progress bar.", rich_help_panel=_LOAD
    ),
    workers: int = typer.Option(
        1,
        min=1,
        metavar="N",
        help="Client processes per tier (when one cannot keep up; see CPU share).",
        rich_help_panel=_LOAD,
    ),
    **dataset_opts: Any,
) -> None:
    """Benchmark a running server at each concurrency tier (vllm bench serve's metrics).

    Each --dataset kind has options of its own, named as vllm bench serve names them.
    """
    opts = {k: v for k, v in locals().items() if k not in ("api_key", "dataset_opts")}
    opts |= dataset_opts
    check_url(url)
    replay = None
    if space is not None or study is not None:
        replay = _replay(space, study, storage, results_dir)
        spec, model = replay.workload, model or replay.model
    else:
        if num_prompts is None and dataset in ("random", "sharegpt"):
            opts["num_prompts"] = 200
        spec = bench_workload(opts)
    if model is None:
        raise TunerError("--model names the served model (or --space / --study gives it)")
    served = Endpoint(model=model, base_url=url, api_key=api_key or None)
    run_bench(served, spec, json_out, progress, workers, replay)
