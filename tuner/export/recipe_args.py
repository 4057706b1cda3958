"""A recipe's flags in the shape of the vLLM recipes: parallelism and JSON flags apart.

The recipes site keeps a preset's tensor-parallel size in its own ``tp`` field (the strategy
writes ``--tensor-parallel-size``), and flags whose value is a JSON object
(``--speculative-config``, ``--compilation-config``) under ``json_args`` as mappings, so a
reader changes one key without re-quoting a string. Every other flag stays in ``args`` as
words, in the launch's order. The address the server binds (``--host``/``--port``) is a
deployment detail, not a tuned setting: it sits apart under ``serve``, never in ``args``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.export.configs import Group, flag_groups

TP_FLAG = "--tensor-parallel-size"
_TP_FLAGS = frozenset({TP_FLAG, "-tp"})
SERVE_FLAGS = {"--host": "host", "--port": "port"}


@dataclass
class RecipeArgs:
    """One launch's flags (or the part a preset or a point holds) as a recipe writes them."""

    args: list[str] = field(default_factory=list)
    json_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    tp: int | None = None  # None: no tensor-parallel flag, the engine's own default
    serve: dict[str, str | int] = field(default_factory=dict)  # host and port, when bound

    def fields(self) -> dict[str, Any]:
        """``serve`` and ``tp`` (when set), ``args`` and ``json_args``, for a preset or a
        point."""
        serve = {"serve": self.serve} if self.serve else {}
        tp = {} if self.tp is None else {"tp": self.tp}
        return {**serve, **tp, "args": self.args, "json_args": self.json_args}


def recipe_args(args: Sequence[str]) -> RecipeArgs:
    """Split flag words into the recipe's ``tp``, ``json_args`` and remaining ``args``."""
    out = RecipeArgs()
    for group in flag_groups(args):
        if (tp := _tp(group)) is not None:
            out.tp = tp
        elif group[0] in SERVE_FLAGS and len(group) == 2:
            value = group[1]
            out.serve[SERVE_FLAGS[group[0]]] = int(value) if value.isdigit() else value
        elif (obj := _json_object(group)) is not None:
            out.json_args[group[0]] = obj
        else:
            out.args += group
    return out


def _tp(group: Group) -> int | None:
    if group[0] in _TP_FLAGS and len(group) == 2 and group[1].isdigit():
        return int(group[1])
    return None


def _json_object(group: Group) -> dict[str, Any] | None:
    # Only a single word that parses to an object: a secret flag reads "${NAME}" and stays put.
    if len(group) != 2 or not group[1].lstrip().startswith("{"):
        return None
    try:
        value = json.loads(group[1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def launch_args(
    args: Sequence[str],
    json_args: Mapping[str, Mapping[str, Any]],
    tp: int | None,
    serve: Mapping[str, str | int] | None = None,
) -> list[str]:
    """The inverse: ``args``, then ``--host``/``--port`` from ``serve``, then
    ``--tensor-parallel-size tp``, then each JSON flag."""
    words = list(args)
    for flag, key in SERVE_FLAGS.items():
        if serve and key in serve:
            words += [flag, str(serve[key])]
    if tp is not None:
        words += [TP_FLAG, str(tp)]
    for flag, obj in json_args.items():
        words += [flag, json.dumps(obj)]
    return words
