"""The exhaustive table behind the search benches: every distinct launch of a discretised
space, measured on every engine seed (replicate) of the simulated engine.

A launch is keyed by the engine config the simulator resolves (knobs that change nothing drop
out), a record by ``replicate|key``. Tables are cached under results/bench/, keyed by the
discretised space (its knobs, rules, workload and engine profile, so two spaces never share a
table) and the simulator's source, so a rerun skips the sweep and either bench fills the cache
for the other (``sample_efficiency``, ``warm_start``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import optuna

from bench.efficiency_truth import Record
from launchers.simengine import EngineRefused, load_profile
from launchers.simengine.config import resolve
from objectives.objective import get_objective
from objectives.race import CEILINGS, END, series_of
from tuner.engine import EngineConfig
from tuner.record.times import TrialTimes
from tuner.record.trial import TrialOutcome
from tuner.run.trial import TrialRunner
from tuner.samplers.registry import grid_values
from tuner.space import render_engine_config
from tuner.space.sample import violated_rules
from tuner.space.schema import Space

REPO = Path(__file__).resolve().parents[1]
SPACE = REPO / "search_spaces" / "minimax_h200.yaml"
CACHE_DIR = REPO / "results" / "bench"
# In the cache key: tables written before "tier_ok" lack per-tier feasibility, before
# "hours" each launch's hardware seconds and its requests' values and ends.
RECORD_FORMAT = "tier_ok+hours+gaps"

Job = TypeVar("Job")
Out = TypeVar("Out")
LaunchKey = Callable[[Space, dict[str, Any]], str]


def launch_key(space: Space, values: dict[str, Any]) -> str:
    """The engine config the simulator resolves (irrelevant knobs drop out), hashed."""
    config = render_engine_config(space, values)
    try:
        cfg = resolve(config.args, config.env, load_profile(space.target.settings()["profile"]))
    except EngineRefused:
        return "refused:" + config.fingerprint()
    return hashlib.sha256(repr(replace(cfg, notes=(), port=0, host="")).encode()).hexdigest()


def cache_path(space: Space) -> Path:
    digest = hashlib.sha256(space.model_dump_json().encode())
    digest.update(RECORD_FORMAT.encode())
    for src in sorted((REPO / "launchers" / "simengine").rglob("*")):
        if src.is_file() and src.suffix in (".py", ".yaml"):
            digest.update(src.read_bytes())
    return CACHE_DIR / f"sample_efficiency_{digest.hexdigest()[:12]}.json"


def load(path: Path) -> dict[str, Record]:
    table: dict[str, Record] = json.loads(path.read_text()) if path.exists() else {}
    return table


def save(path: Path, table: dict[str, Record]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table))


def replicate_names(n: int) -> list[str]:
    """The engine seeds' labels: ``a``, ``b``, ... (``a`` and ``b`` as earlier tables hold)."""
    return [chr(ord("a") + i) for i in range(n)]


def replicate_config(space: Space, values: dict[str, Any], replicate: str) -> EngineConfig:
    """``values`` rendered for engine seed ``replicate`` (the simulator seeds on the label)."""
    return render_engine_config(space, values, labels={"trial": replicate})


def record_of(space: Space, out: TrialOutcome) -> Record:
    """A launch's outcome as the exhaustive table holds it."""
    # empty when nothing was measured (a refusal): feasible_at then reads the constraints
    tier_ok = [bool(out.tier_ok.get(str(c))) for c in space.workload.tiers] if out.tier_ok else []
    return {
        "values": out.values,
        "constraints": out.constraints,
        "kind": out.failure_kind,
        "tier_ok": tier_ok,
    }


def launch_record(
    runner: TrialRunner, space: Space, values: dict[str, Any], replicate: str, folder: Path
) -> Record:
    """One launch of ``values`` on engine seed ``replicate``, as the exhaustive table holds it."""
    times = TrialTimes()
    for stale in folder.glob("bench_c*.json"):  # a launch refused at start-up writes none
        stale.unlink()
    out = runner.run(replicate_config(space, values, replicate), folder, times=times)
    return {**record_of(space, out), **hours_of(space, times, folder)}


def hours_of(space: Space, times: TrialTimes, folder: Path) -> Record:
    """What the launch cost on the hardware's clock (start-up, warm-up, each tier) and each
    tier's requests (the objective's per-request seconds and when each ended, request order),
    from which ``hours_to_answer`` cuts a tier where a race would have stopped it."""
    name = series_of(get_objective(space.study.objective or "").key)
    requests = []
    for c in space.workload.tiers:
        path = folder / f"bench_c{c}.json"
        data = json.loads(path.read_text()).get("requests", {}) if path.exists() else {}
        requests.append(
            {"value": data.get(name or "", []), END: data.get(END, []), **_ceiling_series(data)}
        )
    return {
        "startup_s": times.startup_s or 0.0,
        "warmup_s": times.warmup_s or 0.0,
        "tier_s": [times.tiers_s.get(str(c), 0.0) for c in space.workload.tiers],
        "requests": requests,
    }


def _ceiling_series(data: dict[str, Any]) -> dict[str, Any]:
    """The per-request series an SLO on a longest figure holds a tier to (``CEILINGS``)."""
    return {name: data[name] for name in CEILINGS.values() if name in data}


def all_points(space: Space) -> list[dict[str, Any]]:
    grid = grid_values(space)
    points = (dict(zip(grid, combo, strict=True)) for combo in itertools.product(*grid.values()))
    return [p for p in points if not violated_rules(space, p)]


def distinct_launches(space: Space, key: LaunchKey = launch_key) -> dict[str, dict[str, Any]]:
    """One point per distinct launch the rules allow, by ``key`` (the simulator's resolved
    launch by default)."""
    keyed: dict[str, dict[str, Any]] = {}
    for point in all_points(space):
        keyed.setdefault(key(space, point), point)
    return keyed


# --- measuring, in worker processes -------------------------------------------------------

_W: dict[str, Any] = {}


def quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def init_measure(space: Space) -> None:
    """A worker's runner for ``space``, with a scratch folder for its launches."""
    quiet()
    runner = TrialRunner(space, get_objective(space.study.objective or ""), 60.0)
    _W.update(space=space, runner=runner, dir=Path(tempfile.mkdtemp(prefix="bench_sweep_")))


def measure(values: dict[str, Any], replicate: str) -> Record:
    """One launch in this worker (``init_measure`` first)."""
    return launch_record(_W["runner"], _W["space"], values, replicate, _W["dir"] / "trial")


def _measure_job(job: tuple[str, dict[str, Any], str]) -> tuple[str, Record]:
    key, values, replicate = job
    return f"{replicate}|{key}", measure(values, replicate)


def map_jobs(
    fn: Callable[[Job], Out],
    jobs: Sequence[Job],
    workers: int,
    init: Callable[..., None],
    args: tuple[Any, ...],
    chunks: int = 1,
) -> Iterator[Out]:
    """``fn`` over ``jobs``, each result as it comes: in this process for one worker
    (tests), else in a pool."""
    if workers <= 1:
        init(*args)
        yield from map(fn, jobs)
        return
    with multiprocessing.Pool(workers, init, args) as pool:
        yield from pool.imap_unordered(fn, jobs, chunks)


def measure_all(
    space: Space,
    table: dict[str, Record],
    replicates: Sequence[str],
    workers: int,
    name: str | None = None,
) -> list[str]:
    """Every distinct launch of ``space`` measured on every replicate into ``table``;
    returns the launch keys (``name``: say how many there are)."""
    keyed = distinct_launches(space)
    if name is not None:
        print(f"{name}: {len(keyed)} distinct launches", file=sys.stderr)
    todo = [(k, p, r) for r in replicates for k, p in keyed.items() if f"{r}|{k}" not in table]
    if todo:
        print(f"measuring {len(todo)} launches (exhaustive sweep)...", file=sys.stderr)
        start = time.perf_counter()
        done = map_jobs(_measure_job, todo, workers, init_measure, (space,), 8)
        for i, (name, rec) in enumerate(done, 1):
            table[name] = rec
            if i % 200 == 0:
                took = time.perf_counter() - start
                print(f"  {i}/{len(todo)} ({took:.0f} s)", file=sys.stderr)
    return list(keyed)
