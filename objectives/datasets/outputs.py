"""Output lengths drawn from a distribution, for every dataset kind.

Real traffic answers in many lengths: with every request asking for the same number of tokens,
a multi-second stall is averaged over a long answer and requests finish in lockstep. Any
dataset may give ``output_lengths_file`` (one length per line, e.g. the reply lengths of the
traffic being served), from which each request draws its output length, seeded; the kinds
with one fixed output length (prefix_repetition, long_prompt, sharegpt with ``output_len``)
also take ``output_range_ratio``: uniform in ``[len*(1-r), len*(1+r)]`` as ``vllm bench
serve``'s range ratio. random spreads outputs with its ``range_ratio`` and code_edit with its
own ``output_range_ratio``. The draws come from a stream of their own, so asking for them moves
no prompt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from objectives.datasets._synthetic import spread
from objectives.records import BenchRequest
from tuner.errors import DatasetError

_STREAM = 0x0_75  # the output-length stream, apart from every dataset's own


def respread(
    requests: Sequence[BenchRequest], ds: Any, seed: int, round: int, base_dir: Path | None
) -> tuple[BenchRequest, ...]:
    """``requests`` with output lengths drawn as ``ds`` asks (unchanged where it asks none)."""
    rng = np.random.default_rng([seed, round, _STREAM])
    path: Path | None = getattr(ds, "output_lengths_file", None)
    ratio = float(getattr(ds, "output_range_ratio", 0.0) or 0.0)
    if path is not None:
        lengths = rng.choice(read_lengths(path, base_dir), size=len(requests))
    elif ratio > 0 and ds.kind in ("prefix_repetition", "long_prompt", "sharegpt"):
        lengths = np.array([spread(rng, r.output_len, ratio, 1)[0] for r in requests])
    else:
        return tuple(requests)
    return tuple(
        dataclasses.replace(r, output_len=int(n)) for r, n in zip(requests, lengths, strict=True)
    )


def read_lengths(path: Path, base_dir: Path | None) -> np.ndarray:
    """The positive integers of a lengths file, one a line (blank lines and # comments skipped)."""
    full = path if path.is_absolute() or base_dir is None else base_dir / path
    try:
        lines = full.read_text().splitlines()
    except OSError as err:
        raise DatasetError(f"dataset.output_lengths_file {full}: {err.strerror}") from None
    out = []
    for i, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        if not text.isdigit() or int(text) <= 0:
            raise DatasetError(
                f"dataset.output_lengths_file {full}, line {i}: {text!r} is not a positive "
                "whole number of tokens"
            )
        out.append(int(text))
    if not out:
        raise DatasetError(f"dataset.output_lengths_file {full} holds no length")
    return np.array(out)
