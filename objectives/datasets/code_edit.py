"""``code_edit``: files written from recurring line shapes, each sent with several edit
requests: shared prefixes for the prefix cache, repeated n-grams for prompt-lookup drafting."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from objectives.datasets._base import Dataset, Draw
from objectives.datasets._synthetic import render, token_ids
from objectives.records import BenchRequest
from objectives.workload import CodeEditDataset


class CodeEdit(Dataset[CodeEditDataset]):
    """``num_files * edits`` prompts in a seeded order, cycled up to the count asked."""

    kind: ClassVar[str] = "code_edit"

    def requests(self, ds: CodeEditDataset, draw: Draw) -> tuple[BenchRequest, ...]:
        content = np.random.default_rng([draw.seed, draw.round])
        idioms = token_ids(content, ds.idioms * ds.line_len, ds.vocab_size)
        idioms = idioms.reshape(ds.idioms, ds.line_len)
        lengths = _lengths(ds, np.random.default_rng(draw.seed))
        reqs = [
            req
            for f, n in enumerate(lengths)
            for req in _edits(ds, draw, content, idioms, f, int(n))
        ]
        order = np.random.default_rng(draw.seed).permutation(len(reqs)) if ds.shuffle else None
        ordered = [reqs[int(i)] for i in order] if order is not None else reqs
        return tuple(ordered[i % len(ordered)] for i in range(draw.count))


def _lengths(ds: CodeEditDataset, rng: np.random.Generator) -> np.ndarray:
    # From the seed alone, as every dataset's shapes: each tier sends files of the same sizes.
    low = max(1, int(ds.file_len * (1 - ds.range_ratio)))
    high = max(low, int(ds.file_len * (1 + ds.range_ratio)))
    return rng.integers(low, high + 1, ds.num_files)


def _file(
    ds: CodeEditDataset, content: np.random.Generator, idioms: np.ndarray, n: int
) -> np.ndarray:
    """``n`` tokens of lines drawn from the idioms, each with one identifier of its own."""
    lines = -(-n // ds.line_len)
    body = idioms[content.integers(0, ds.idioms, lines)].copy()
    where = content.integers(0, ds.line_len, lines)
    body[np.arange(lines), where] = token_ids(content, lines, ds.vocab_size)
    return body.ravel()[:n]


def _edits(
    ds: CodeEditDataset,
    draw: Draw,
    content: np.random.Generator,
    idioms: np.ndarray,
    f: int,
    n: int,
) -> list[BenchRequest]:
    # The file is drawn before its edit requests: the content stream's order fixes each prompt.
    file = _file(ds, content, idioms, n)
    out = []
    for _ in range(ds.edits):
        ids = np.concatenate([file, token_ids(content, ds.request_len, ds.vocab_size)])
        key = f"file-{draw.round}-{f}"
        out.append(BenchRequest(render(ids, draw.as_ids), len(ids), ds.output_len, key, n))
    return out
