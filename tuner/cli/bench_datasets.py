"""``tune bench``'s dataset options: each dataset kind's own flags, named as ``vllm bench serve``
names them (``--random-input-len``, ``--prefix-repetition-num-prefixes``), each setting the field
of that kind's model in ``objectives.workload`` whose name it carries.

The tables here are the one owner of which flag sets which field: they make the typer options
(with the model's default and description, in one help panel per kind) and turn the flags given
into a workload's ``dataset:``. A flag of another kind than ``--dataset`` chose is a one-line
usage error, never ignored, so a flag cannot mean one thing for one kind and another for the next.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from rich.markup import escape

from objectives.datasets import DATASET_KINDS
from objectives.workload import (
    CodeEditDataset,
    LongPromptDataset,
    PrefixRepetitionDataset,
    RandomDataset,
    ShareGPTDataset,
)
from tuner.errors import TunerError

MODELS: dict[str, type[BaseModel]] = {
    "random": RandomDataset,
    "sharegpt": ShareGPTDataset,
    "prefix_repetition": PrefixRepetitionDataset,
    "code_edit": CodeEditDataset,
    "long_prompt": LongPromptDataset,
}

# The fields each kind's own options set, in the order --help lists them.
PER_KIND: dict[str, tuple[str, ...]] = {
    "random": ("input_len", "output_len", "range_ratio", "prefix_len"),
    "sharegpt": (
        "path",
        "output_len",
        "max_output_len",
        "min_len",
        "max_prompt_len",
        "chars_per_token",
    ),
    "prefix_repetition": ("prefix_len", "suffix_len", "num_prefixes", "repeats", "output_len"),
    "code_edit": (
        "num_files",
        "file_len",
        "range_ratio",
        "edits",
        "request_len",
        "output_len",
        "line_len",
        "idioms",
    ),
    "long_prompt": ("input_len", "output_len"),
}

# Options of every kind whose model has the field: random has no output_range_ratio, as it
# spreads its outputs with --random-range-ratio (as vllm does); sharegpt sends text, no ids.
SHARED = ("output_range_ratio", "output_lengths_file", "vocab_size")

# What tune bench sends for a field the model requires when its option is left out.
FALLBACKS = {"input_len": 1024, "output_len": 128, "prefix_len": 1024, "file_len": 1024}
FALLBACKS |= {"num_prefixes": 1, "repeats": 1, "num_files": 1, "edits": 1}

# Generic names, hidden: vllm bench serve's --input-len and --output-len set the chosen kind's
# own length, and its --dataset-path names the sharegpt file; scripts written for either work.
ALIASES: dict[str, dict[str, str]] = {
    "input_len": {"random": "input_len", "long_prompt": "input_len"}
    | {"prefix_repetition": "prefix_len", "code_edit": "file_len"},
    "output_len": {kind: "output_len" for kind in MODELS},
    "dataset_path": {"sharegpt": "path"},
}

# Help where the model's description names fields rather than flags, or is too long for a table.
HELP = {
    "random_input_len": "Prompt length in tokens (before --random-range-ratio).",
    "random_output_len": "Output length in tokens (before --random-range-ratio).",
    "random_range_ratio": "Prompt and output lengths are drawn uniformly from "
    "[len*(1-r), len*(1+r)]; 0 = exact.",
    "sharegpt_path": "ShareGPT-style JSON or JSONL file (required by --dataset sharegpt).",
    "sharegpt_max_output_len": "Cap on the output length taken from the reply.",
    "code_edit_file_len": "Tokens of each file (before --code-edit-range-ratio).",
    "code_edit_output_len": "Output length in tokens (before --output-range-ratio).",
    "prefix_repetition_output_len": "Output length in tokens (before --output-range-ratio).",
    "long_prompt_output_len": "Output length in tokens (before --output-range-ratio).",
    "code_edit_idioms": "Distinct line shapes the files are written from (fewer repeat more).",
    "output_range_ratio": "Output lengths uniform in [len*(1-r), len*(1+r)], seeded; 0 = exact "
    "(random: --random-range-ratio).",
    "output_lengths_file": "Output lengths, one a line, each request drawing one (seeded).",
    "vocab_size": "Token ids are drawn from [100, N) (default: the served model's; overrides "
    "--tokenizer).",
}


@dataclass(frozen=True)
class DatasetOption:
    """One flag and the field it sets in each kind it applies to."""

    name: str  # the parameter name; the flag is it with dashes
    fields: dict[str, str]  # kind -> field of that kind's model
    panel: str | None  # the --help panel; None: hidden

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def field_info(self) -> FieldInfo:
        kind, field = next(iter(self.fields.items()))
        return MODELS[kind].model_fields[field]


SHARED_PANEL = "dataset"  # --dataset and the options of several kinds


def panel_title(kind: str) -> str:
    return f"{kind} dataset"


def _options() -> tuple[DatasetOption, ...]:
    shared = [
        DatasetOption(f, {k: f for k, m in MODELS.items() if f in m.model_fields}, SHARED_PANEL)
        for f in SHARED
    ]
    own = [
        DatasetOption(f"{kind}_{f}", {kind: f}, panel_title(kind))
        for kind in DATASET_KINDS
        for f in PER_KIND[kind]
    ]
    hidden = [DatasetOption(name, fields, None) for name, fields in ALIASES.items()]
    return (*shared, *own, *hidden)


OPTIONS = _options()


def dataset_body(kind: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The ``dataset:`` of a ``kind`` workload from the options ``given`` (None: left out).

    Raises:
        TunerError: an unknown kind, an option of another kind, two options for one field,
            or a field the kind requires that no option nor fallback gives.
    """
    if kind not in MODELS:
        raise TunerError(f"--dataset {kind!r} is not one of {', '.join(DATASET_KINDS)}")
    body: dict[str, Any] = {"kind": kind}
    setter: dict[str, str] = {}
    for opt in (o for o in OPTIONS if given.get(o.name) is not None):
        field = _field_of(opt, kind)
        if field in setter:
            raise TunerError(f"{setter[field]} and {opt.flag} both set {kind}'s {field}; give one")
        setter[field], body[field] = opt.flag, given[opt.name]
    return {**_fallbacks(kind, body), **body}


def _field_of(opt: DatasetOption, kind: str) -> str:
    if kind not in opt.fields:
        *others, last = opt.fields
        kinds = f"{', '.join(others)} or {last}" if others else last
        raise TunerError(f"{opt.flag} applies to --dataset {kinds}, not {kind}")
    return opt.fields[kind]


def flag_of(kind: str, field: str, given: Mapping[str, Any]) -> str | None:
    """The flag that set ``kind``'s ``field``: the one given, else the kind's own (None: none)."""
    setters = [opt for opt in OPTIONS if opt.fields.get(kind) == field]
    chosen = [opt for opt in setters if given.get(opt.name) is not None] or setters
    return chosen[0].flag if chosen else None


def _fallbacks(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """tune bench's value of each field ``kind`` requires that ``body`` leaves out."""
    missing = [
        f for f, info in MODELS[kind].model_fields.items() if info.is_required() and f not in body
    ]
    lacking = [f for f in missing if f not in FALLBACKS]
    if lacking:
        raise TunerError(f"--dataset {kind} needs {flag_of(kind, lacking[0], {})}")
    return {f: FALLBACKS[f] for f in missing if f in FALLBACKS}


def with_dataset_options(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with one typer option per row of the tables, placed right after its
    ``dataset`` parameter (so --help shows each kind's panel after the shared dataset panel);
    its ``**dataset_opts`` gets the options given on the command line, no others."""

    @functools.wraps(command)
    def run(ctx: typer.Context, **kwargs: Any) -> None:
        mine = {opt.name for opt in OPTIONS}
        given = {n: v for n, v in kwargs.items() if n in mine and _given(ctx, n)}
        command(**{n: v for n, v in kwargs.items() if n not in mine}, **given)

    run.__signature__ = _signature(command)  # type: ignore[attr-defined]
    return run


def _given(ctx: typer.Context, name: str) -> bool:
    # Its default stands for "left out" (these options read no environment variable).
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _signature(command: Callable[..., None]) -> inspect.Signature:
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = inspect.signature(command, eval_str=True).parameters.values()
    fixed = [p.replace(kind=keyword) for p in params if p.kind is not p.VAR_KEYWORD]
    at = [p.name for p in fixed].index("dataset") + 1
    fixed[at:at] = [_parameter(opt) for opt in OPTIONS]
    return inspect.Signature([inspect.Parameter("ctx", keyword, annotation=typer.Context), *fixed])


def _parameter(opt: DatasetOption) -> inspect.Parameter:
    info = opt.field_info()
    option = typer.Option(
        shown_default(opt),  # for --help only: options left out never reach the command
        opt.flag,
        metavar=_metavar(opt.name, info),
        help=escape(HELP.get(opt.name) or info.description or ""),
        hidden=opt.panel is None,
        rich_help_panel=opt.panel,
    )
    kind = inspect.Parameter.KEYWORD_ONLY
    return inspect.Parameter(opt.name, kind, default=option, annotation=info.annotation)


def _metavar(name: str, info: FieldInfo) -> str:
    if name.endswith("_ratio"):
        return "R"
    if "Path" in str(info.annotation):
        return "FILE"
    return "X" if info.annotation is float else "N"


def shown_default(opt: DatasetOption) -> Any:
    """The value a left-out option stands for, as --help shows it."""
    info = opt.field_info()
    if info.is_required():
        return FALLBACKS.get(next(iter(opt.fields.values())))
    return info.default
