"""Fitting the cpu profile's ``fitted`` factors to the calibration configs' real figures
(least squares on log ratios, Nelder-Mead from the shipped values), and writing them back."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench.sim_vs_real_runs import (
    CALIBRATION,
    FIT_KEYS,
    PROFILE,
    measure,
    simulated,
    workload_space,
)
from tuner.space import Space


def set_factors(base: dict[str, Any], values: dict[str, float]) -> dict[str, Any]:
    data = json.loads(json.dumps(base))
    for path, value in values.items():
        node = data
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = round(float(value), 6)
    return data


def get_factor(data: dict[str, Any], path: str) -> float:
    node: Any = data
    for part in path.split("."):
        node = node[part]
    return float(node)


class Predictor:
    """The simulated engine on a profile whose fitted factors are set from a vector."""

    def __init__(self, space: Space, base: dict[str, Any], out: Path) -> None:
        self.space, self.base, self.out = space, base, out
        self.paths = sorted(p for p in base["fitted"] if p != "overheads.dense_eff")
        self.file = out / "cpu.yaml"
        self.calls = 0

    def start(self) -> np.ndarray:
        return np.log([get_factor(self.base, p) for p in self.paths])

    def profile(self, x: np.ndarray) -> dict[str, Any]:
        values = dict(zip(self.paths, np.exp(x), strict=True))
        # The linear layers share one GEMM library: the attention projections and the MLP run
        # at one efficiency.
        values["overheads.dense_eff"] = values["moe_backends.dense_mlp.gemm_eff"]
        capped = ("_eff", ".acceptance")  # fractions
        values = {k: min(v, 1.0) if k.endswith(capped) else v for k, v in values.items()}
        return set_factors(self.base, values)

    def run(self, x: np.ndarray, wl: str, params: dict[str, Any]) -> dict[str, dict[str, float]]:
        self.file.write_text(yaml.safe_dump(self.profile(x), sort_keys=False))
        self.calls += 1
        space = simulated(workload_space(self.space, wl), self.file)
        return measure(space, params, self.out / "sim" / f"{self.calls % 4}")


def log_errors(pred: dict[str, dict[str, float]], real: dict[str, dict[str, float]]) -> list[float]:
    return [
        float(np.log(pred[t][k] / real[t][k]))
        for t in real
        for k in FIT_KEYS
        if real[t].get(k) and pred.get(t, {}).get(k)
    ]


def fit(pred: Predictor, real: dict[str, Any], evals: int) -> np.ndarray:
    """The fitted factors' log values for the (pooled) calibration figures in ``real``."""

    measured = [(lb, wl, ps) for lb, wl, ps in CALIBRATION if f"{lb}/{wl}" in real["calibration"]]

    def loss(x: np.ndarray) -> float:
        errs: list[float] = []
        for label, wl, params in measured:  # sittings from before a config was added lack it
            errs += log_errors(pred.run(x, wl, params), real["calibration"][f"{label}/{wl}"])
        return float(np.mean(np.square(errs)))

    return nelder_mead(loss, pred.start(), evals)


def nelder_mead(f: Any, x0: np.ndarray, evals: int, step: float = 0.5) -> np.ndarray:
    """Minimise ``f`` from ``x0`` (log-space steps) within about ``evals`` evaluations."""
    pts = [x0] + [x0 + step * np.eye(len(x0))[i] for i in range(len(x0))]
    vals = [f(p) for p in pts]
    n = len(pts) - 1
    while n < evals:
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        centre = np.mean(pts[:-1], axis=0)
        refl = centre + (centre - pts[-1])
        fr = f(refl)
        n += 1
        if fr < vals[0]:
            exp = centre + 2 * (centre - pts[-1])
            fe = f(exp)
            n += 1
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = centre + 0.5 * (pts[-1] - centre)
            fc = f(con)
            n += 1
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:  # shrink towards the best
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
                n += len(pts) - 1
    print(f"fit: mean squared log error {min(vals):.4f} after {n} runs", file=sys.stderr)
    return pts[int(np.argmin(vals))]


def write_profile(fitted: dict[str, float]) -> None:
    """Replaces each fitted factor's value in cpu.yaml, keeping its comments."""
    lines = PROFILE.read_text().splitlines()
    for path, value in fitted.items():
        *parents, leaf = path.split(".")
        depth, inside = 0, True
        for i, line in enumerate(lines):
            stripped = line.strip()
            indent = (len(line) - len(line.lstrip())) // 2
            if depth < len(parents) and stripped.startswith(parents[depth] + ":"):
                depth, inside = depth + 1, True
            elif (
                depth == len(parents)
                and inside
                and indent == depth
                and stripped.startswith(leaf + ":")
            ):
                rest = line.split("#", 1)
                comment = f"  # {rest[1].strip()}" if len(rest) > 1 else ""
                lines[i] = f"{'  ' * depth}{leaf}: {value:.4g}{comment}"
                break
    PROFILE.write_text("\n".join(lines) + "\n")
