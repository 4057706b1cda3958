"""``recipe.yaml``: the recommended config per tier as a vLLM-recipe-style preset.

Shape (as the recipes site's): ``model.docker_image`` keys the image by vendor;
``presets.<study>`` holds the hardware id (``recipe_hardware``), the strategy, the image per
engine, the address the server binds (``serve``: host and port, never in ``args``), the
``tp``/``args``/``json_args``/``env`` every point shares and ``points.c<N>`` with each tier's
``label``, ``description``, ``concurrency``, its own ``tp``/``args``/``json_args``/``env`` on
top, and the figures measured for it beside the baseline's; one point is the ``default``.
``tp`` is the tensor-parallel size (absent when the launch sets none) and ``json_args`` maps
each JSON-valued flag to its object (see ``recipe_args``). ``vllm serve <model> <args> --host
<host> --port <port> --tensor-parallel-size <tp> <json_args>`` with the preset env and point env
is exactly the launch the tier's trial measured, but bound to ``engine.serve_host`` for
deployment. A point whose config ``tune capacity`` measured also says
how many users one replica serves within the SLOs, beside the defaults' count (``capacity``).
"""

from __future__ import annotations

from typing import Any

import yaml

from tuner.export.build import Export, TierExport
from tuner.export.configs import LaunchConfig, split_shared
from tuner.export.docker_run import image_of
from tuner.export.recipe_args import launch_args, recipe_args
from tuner.export.recipe_hardware import hardware_id, strategy, vendor
from tuner.score.quality import Quality
from tuner.storage.capacity import CapacityReport, point_capacity


def recipe_data(export: Export) -> dict[str, Any]:
    data = export.data
    engine = data.space.engine
    return {
        "model": {
            "model_id": engine.model,
            "served_model_name": engine.request_model,
            "docker_image": {vendor(data.space): image_of(data.space)},
        },
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
        "hardware": hardware_id(data.space),
        "hardware_detail": data.space.hardware,
        "strategy": strategy(split.args),
        "description": data.space.description,
        "workload": _workload(export),
        "image": {data.space.engine.name: image_of(data.space)},
        "command": launches[0].program if launches else data.space.engine.argv_prefix(),
        **recipe_args(split.args).fields(),
        "env": split.env,
        "secret_env": sorted({n for launch in launches for n in launch.secret_env}),
        "secret_args": sorted({n for launch in launches for n in launch.secret_args}),
        "points": {},
    }
    # The recipes mark one point to deploy when the reader names none: the highest tier, as
    # a replica is sized for its busiest hour.
    top = max((t.concurrency for t in ready), default=None)
    for i, t in enumerate(ready):
        point = _point(t, split.point_args[i], split.point_env[i], export)
        point = _with_default(point, t.concurrency == top)
        assert t.tier.recommended is not None
        found = _capacity(t.tier.recommended.params, export.capacity)
        preset["points"][f"c{t.concurrency}"] = point | found
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


def _point(t: TierExport, args: list[str], env: dict[str, str], export: Export) -> dict[str, Any]:
    rec, base = t.tier.recommended, t.tier.baseline
    assert rec is not None and t.launch is not None
    effects = changed_knobs(export, t.concurrency)
    point: dict[str, Any] = {
        "label": str(t.concurrency),
        "description": _description(t),
        "concurrency": t.concurrency,
        **recipe_args(args).fields(),
        "env": env,
        "trial": rec.trial,
        # Only the knobs changed from the engine's defaults, each with its measured effect
        # (tuner.score.revert); a knob that did nothing at this tier went back to its default.
        "params": {k: rec.params[k] for k in effects},
        "effects": effects,
        "measured": _rounded(rec.figures()),
    }
    idle = _idle(export, t.concurrency)
    if idle:  # what the trial ran with that cannot act here: deployed at the defaults
        point["idle"] = idle
    if base is not None:
        point["baseline"] = {"trial": base.trial, **_rounded(base.figures())}
    point["gain"] = None if t.tier.gain is None else round(t.tier.gain, 4)
    # A negative gain is read with its verdict: against a baseline that queued users
    # ("baseline queued") the pick is slower per token and still the one to deploy.
    point["verdict"] = t.tier.verdict
    point["why"] = t.tier.choice
    point["answers"] = _answers(rec.quality)
    point["verified"] = t.launch.verified
    return point


def _idle(export: Export, concurrency: int) -> dict[str, Any]:
    rec = export.recommendation(concurrency)
    return {} if rec is None else dict(rec.idle)


def _with_default(point: dict[str, Any], default: bool) -> dict[str, Any]:
    # Where the recipes put it: after the label and description, on the default point only.
    head = {k: point[k] for k in ("label", "description")}
    return head | ({"default": True} if default else {}) | point


def _description(t: TierExport) -> str:
    rec = t.tier.recommended
    assert rec is not None
    users = "1 user" if t.concurrency == 1 else f"{t.concurrency} concurrent users"
    return f"Tuned for {users}: trial {rec.trial} (verdict: {t.tier.verdict})."


def _answers(q: Quality) -> dict[str, Any] | None:
    """How the pick's probe answers agree with the baseline's (None: not measured)."""
    if q.agreement is None and q.score is None:
        return None
    a = q.agreement
    out: dict[str, Any] = {}
    if a is not None:
        first = None if a.first_diff is None else round(a.first_diff, 2)
        out.update(probes=a.probes, identical=a.identical, tokens=round(a.tokens, 4))
        out["first_difference"] = first
    if q.score is not None:
        out.update(score=q.score, baseline_score=q.baseline_score, score_ratio=q.ratio)
    return out


def changed_knobs(export: Export, concurrency: int) -> dict[str, str]:
    """Each knob the tier's pick changes from the engine's default: ``value: how its effect
    was measured`` (``tuner.score.evidence``, the words every export shows)."""
    rec = export.recommendation(concurrency)
    return {} if rec is None else {k: f"{n['value']}: {n['words']}" for k, n in rec.knobs.items()}


def _capacity(params: dict[str, Any], capacity: CapacityReport | None) -> dict[str, Any]:
    # Matched on every parameter (a point lists only the changed ones): a capacity measured
    # for an earlier pick is left out.
    found = point_capacity(capacity, params)
    return {"capacity": found} if found is not None else {}


def _rounded(figures: dict[str, float | int]) -> dict[str, float | int]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}


def recipe_yaml(export: Export) -> str:
    head = (
        f"# Recommended {export.data.space.engine.name} configs per concurrency tier, exported "
        f"from study '{export.data.name}'.\n# vllm serve = preset command + preset args + point "
        "args + --host/--port from serve\n#   + --tensor-parallel-size tp + each json_args flag "
        "with its object as JSON;\n#   env = preset env + point env.\n"
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
    serve = {**p.get("serve", {}), **pt.get("serve", {})}
    args = launch_args([*p["args"], *pt["args"]], json_args, pt.get("tp", p.get("tp")), serve)
    return LaunchConfig(
        trial=int(pt["trial"]),
        program=list(p["command"]),
        args=args,
        env={**p["env"], **pt["env"]},
        secret_env=list(p.get("secret_env", [])),
        secret_args=list(p.get("secret_args", [])),
        verified=bool(pt.get("verified")),
    )
