"""``recipe.yaml``: the recommended config per tier as a vLLM-recipe-style preset.

Shape (as the recipes site's ``presets``): ``presets.<study>`` holds the image, the hardware,
the ``tp``/``args``/``json_args``/``env`` every point shares and ``points.c<N>`` with each
tier's ``concurrency``, its own ``tp``/``args``/``json_args``/``env`` on top, and the figures
measured for it beside the baseline's. ``tp`` is the tensor-parallel size (absent when the
launch sets none) and ``json_args`` maps each JSON-valued flag to its object (see
``recipe_args``). ``vllm serve <model> <args> --tensor-parallel-size <tp> <json_args>`` with the
preset env and point env is exactly the launch the tier's trial measured, but bound to
``engine.serve_host`` for deployment. A point whose config ``tune capacity`` measured also says
how many users one replica serves within the SLOs, beside the defaults' count (``capacity``).
"""

from __future__ import annotations

from typing import Any

import yaml

from tuner.export.build import Export, TierExport
from tuner.export.configs import LaunchConfig, split_shared
from tuner.export.docker_run import image_of
from tuner.export.recipe_args import launch_args, recipe_args
from tuner.storage.capacity import CapacityReport, point_capacity


def recipe_data(export: Export) -> dict[str, Any]:
    data = export.data
    engine = data.space.engine
    return {
        "model": {"model_id": engine.model, "served_model_name": engine.request_model},
        "engine": {"name": engine.name, "version": engine.version},
        "study": {
            "name": data.name,
            "objective": data.objective.name,
            "objective_key": data.objective.key,
            "direction": data.objective.direction,
            "measured_on": data.target_kind,
            "trials": data.counts(),
        },
        "presets": {data.name: _preset(export)},
    }


def _preset(export: Export) -> dict[str, Any]:
    data = export.data
    ready = [t for t in export.tiers if t.launch is not None]
    launches = [t.launch for t in ready if t.launch is not None]
    split = split_shared(launches)
    preset: dict[str, Any] = {
        "label": f"{data.name} ({data.objective.name})",
        "hardware": data.space.hardware,
        "description": data.space.description,
        "workload": _workload(export),
        "image": image_of(data.space),
        "command": launches[0].program if launches else data.space.engine.argv_prefix(),
        **recipe_args(split.args).fields(),
        "env": split.env,
        "secret_env": sorted({n for launch in launches for n in launch.secret_env}),
        "secret_args": sorted({n for launch in launches for n in launch.secret_args}),
        "points": {},
    }
    for i, t in enumerate(ready):
        point = _point(t, split.point_args[i], split.point_env[i])
        preset["points"][f"c{t.concurrency}"] = _with_capacity(point, export.capacity)
    missing = [f"c{t.concurrency}" for t in export.tiers if t.launch is None]
    if missing:
        preset["no_feasible_config"] = missing
    return preset


def _workload(export: Export) -> str:
    w = export.data.space.workload
    d = w.dataset
    text = f"{d.kind} dataset, {w.num_prompts} requests per tier"
    input_len, output_len = getattr(d, "input_len", None), getattr(d, "output_len", None)
    if input_len:
        text += f", ~{input_len} input / {output_len or '?'} output tokens"
    return text


def _point(t: TierExport, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    rec, base = t.tier.recommended, t.tier.baseline
    assert rec is not None and t.launch is not None
    point: dict[str, Any] = {
        "label": str(t.concurrency),
        "concurrency": t.concurrency,
        **recipe_args(args).fields(),
        "env": env,
        "trial": rec.trial,
        "params": rec.params,
        "measured": _rounded(rec.figures()),
    }
    if base is not None:
        point["baseline"] = {"trial": base.trial, **_rounded(base.figures())}
    point["gain"] = None if t.tier.gain is None else round(t.tier.gain, 4)
    # A negative gain is read with its verdict: against a baseline that queued users
    # ("baseline queued") the pick is slower per token and still the one to deploy.
    point["verdict"] = t.tier.verdict
    point["why"] = t.tier.choice
    point["verified"] = t.launch.verified
    return point


def _with_capacity(point: dict[str, Any], capacity: CapacityReport | None) -> dict[str, Any]:
    # Matched on the parameters: a capacity measured for an earlier pick is left out.
    found = point_capacity(capacity, point["params"])
    return {**point, "capacity": found} if found is not None else point


def _rounded(figures: dict[str, float | int]) -> dict[str, float | int]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}


def recipe_yaml(export: Export) -> str:
    head = (
        f"# Recommended {export.data.space.engine.name} configs per concurrency tier, exported "
        f"from study '{export.data.name}'.\n# vllm serve = preset command + preset args + point "
        "args + --tensor-parallel-size tp\n#   + each json_args flag with its object as JSON; "
        "env = preset env + point env.\n"
    )
    body = yaml.safe_dump(recipe_data(export), sort_keys=False, width=100, allow_unicode=True)
    return head + body


def point_launch(recipe: dict[str, Any], preset: str, point: str) -> LaunchConfig:
    """Rebuild the launch of one point from a loaded recipe (the inverse of the export)."""
    p = recipe["presets"][preset]
    pt = p["points"][point]
    # The export puts tp and each JSON flag in the preset or in the points, never both; in a
    # hand-edited recipe that repeats one, the point's wins, as a point overrides its preset.
    json_args = {**p.get("json_args", {}), **pt.get("json_args", {})}
    args = launch_args([*p["args"], *pt["args"]], json_args, pt.get("tp", p.get("tp")))
    return LaunchConfig(
        trial=int(pt["trial"]),
        program=list(p["command"]),
        args=args,
        env={**p["env"], **pt["env"]},
        secret_env=list(p.get("secret_env", [])),
        secret_args=list(p.get("secret_args", [])),
        verified=bool(pt.get("verified")),
    )
