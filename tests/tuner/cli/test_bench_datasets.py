"""``tune bench``'s dataset options: one panel per kind, each flag reaching its kind's field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from objectives.datasets import DATASET_KINDS
from objectives.workload import WorkloadSpec
from tuner.cli import app
from tuner.cli.bench import bench_workload
from tuner.cli.bench_datasets import (
    MODELS,
    OPTIONS,
    PER_KIND,
    DatasetOption,
    panel_title,
    shown_default,
)
from tuner.errors import TunerError

# Everything but the dataset: what the command passes besides the dataset options.
BASE: dict[str, Any] = {
    "num_prompts": None,
    "warmup": 0,
    "concurrency": "1",
    "request_rate": None,
    "burstiness": 1.0,
    "seed": 0,
    "endpoint": "completions",
    "timeout": 5.0,
}


def workload(kind: str, **given: Any) -> WorkloadSpec:
    counted = {"num_prompts": 4} if kind in ("random", "sharegpt") else {}
    return bench_workload({**BASE, **counted, "dataset": kind, **given})


def own_options(kind: str) -> list[DatasetOption]:
    return [o for o in OPTIONS if o.panel == panel_title(kind)]


def help_at_80_columns() -> str:
    result = CliRunner().invoke(
        app, ["bench", "--help"], env={"COLUMNS": "80", "NO_COLOR": "1"}, terminal_width=80
    )
    assert result.exit_code == 0, result.output
    return result.output


def rows(panel: str) -> dict[str, str]:
    """Each option of a rendered panel and its help, continuation lines joined."""
    out: dict[str, str] = {}
    flag = ""
    for line in panel.splitlines():
        start = re.match(r"│ (\*  )?(--\S+)", line)
        if start:
            flag = start.group(2)
            out[flag] = ""
        if flag:
            out[flag] = " ".join([out[flag], *line.strip().strip("│").split()]).strip()
    return out


def test_help_at_80_columns_shows_every_option_whole_with_its_default() -> None:
    text = help_at_80_columns()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text  # rich cuts a name too wide for its column with an ellipsis
    for kind in DATASET_KINDS:
        assert f"─ {panel_title(kind)} ─" in text
        panel = rows(text.split(f"─ {panel_title(kind)} ─", 1)[1].split("╰", 1)[0])
        assert list(panel) == [o.flag for o in own_options(kind)]
        for opt in own_options(kind):
            shown = shown_default(opt)
            assert shown is None or f"[default: {shown}]" in panel[opt.flag], opt.flag
    shared = rows(text.split("─ dataset ─", 1)[1].split("╰", 1)[0])
    assert all(kind in shared["--dataset"] for kind in DATASET_KINDS)
    assert "--input-len" not in text and "--dataset-path" not in text  # hidden aliases


def test_help_text_reads_as_sentences_at_80_columns() -> None:
    # A help line that is not an option's first starts where its panel's help column does:
    # at column 50 at most, leaving 30 characters or more a line in every panel, not the 18
    # of one table shared by every option.
    lines = [ln for ln in help_at_80_columns().splitlines() if re.match(r"│ +[^ -]", ln)]
    starts = [len(ln) - len(ln[1:].lstrip()) for ln in lines]
    assert len(starts) > 20 and max(starts) <= 50


def values_for(kind: str) -> dict[str, Any]:
    """A distinct valid value for each of ``kind``'s own options."""
    out: dict[str, Any] = {}
    for i, opt in enumerate(own_options(kind)):
        annotation = str(opt.field_info().annotation)
        if "Path" in annotation:
            out[opt.name] = Path(f"{kind}.json")
        elif "float" in annotation:
            out[opt.name] = 0.25 + i / 100
        else:
            out[opt.name] = 10 + i
    if kind == "sharegpt":  # the cap must be above the fixed length
        out["sharegpt_max_output_len"] = 1000
    return out


@pytest.mark.parametrize("kind", DATASET_KINDS)
def test_each_kinds_options_reach_its_dataset_fields(kind: str) -> None:
    given = values_for(kind)
    ds = workload(kind, **given).dataset
    assert ds.kind == kind
    for opt in own_options(kind):
        assert getattr(ds, opt.fields[kind]) == given[opt.name], opt.flag


@pytest.mark.parametrize("kind", DATASET_KINDS)
def test_left_out_options_are_the_defaults_help_shows(kind: str) -> None:
    path = {"sharegpt_path": Path("p.json")} if kind == "sharegpt" else {}
    ds = workload(kind, **path).dataset
    for opt in own_options(kind):
        if opt.name not in path:
            assert getattr(ds, opt.fields[kind]) == shown_default(opt), opt.flag


def test_the_shared_options_reach_every_kind_with_the_field() -> None:
    ds = workload("long_prompt", output_range_ratio=0.5).dataset
    assert getattr(ds, "output_range_ratio", None) == 0.5
    ds = workload("code_edit", vocab_size=900).dataset
    assert getattr(ds, "vocab_size", None) == 900


@pytest.mark.parametrize(
    ("kind", "given", "message"),
    [
        ("random", {"sharegpt_output_len": 5}, "--sharegpt-output-len applies to --dataset "
         "sharegpt, not random"),
        ("code_edit", {"random_input_len": 5}, "--random-input-len applies to --dataset "
         "random, not code_edit"),
        ("random", {"output_range_ratio": 0.5}, "--output-range-ratio applies to --dataset "
         "sharegpt, prefix_repetition, code_edit or long_prompt, not random"),
        ("sharegpt", {"sharegpt_path": Path("p"), "vocab_size": 9}, "--vocab-size applies to "
         "--dataset random, prefix_repetition, code_edit or long_prompt, not sharegpt"),
        ("sharegpt", {}, "--dataset sharegpt needs --sharegpt-path"),
        ("code_edit", {"input_len": 8, "code_edit_file_len": 9}, "--code-edit-file-len and "
         "--input-len both set code_edit's file_len; give one"),
        ("random", {"random_output_len": 0}, "--random-output-len: Input should be greater"),
    ],
)  # fmt: skip
def test_an_option_of_another_kind_is_refused_naming_it(
    kind: str, given: dict[str, Any], message: str
) -> None:
    with pytest.raises(TunerError) as err:
        workload(kind, **given)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("kind", "field"),
    [("random", "input_len"), ("prefix_repetition", "prefix_len"), ("code_edit", "file_len")],
)
def test_vllms_generic_names_set_the_chosen_kinds_own_length(kind: str, field: str) -> None:
    ds = workload(kind, input_len=40, output_len=6).dataset
    assert getattr(ds, field) == 40 and getattr(ds, "output_len", None) == 6


def test_vllms_dataset_path_names_the_sharegpt_file() -> None:
    ds = workload("sharegpt", dataset_path=Path("p.json"), output_len=7).dataset
    assert getattr(ds, "path", None) == Path("p.json") and getattr(ds, "output_len", None) == 7


def test_every_field_of_every_kind_has_an_option() -> None:
    assert tuple(PER_KIND) == DATASET_KINDS == tuple(MODELS)
    for kind, model in MODELS.items():
        reached = {o.fields[kind] for o in OPTIONS if kind in o.fields}
        # kind is --dataset itself; shuffle is left to a space file (a --x/--no-x pair per
        # kind would double the width of its panel's name column).
        assert set(model.model_fields) - reached == {"kind", "shuffle"} & set(model.model_fields)
