"""``code_edit``: files written from recurring line shapes, each sent with several edit
requests: shared prefixes for the prefix cache, repeated n-grams for prompt-lookup drafting."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from objectives.datasets._base import Dataset, Draw
from objectives.datasets._synthetic import render, spread, token_ids
from objectives.records import BenchRequest
from objectives.workload import CodeEditDataset


class CodeEdit(Dataset[CodeEditDataset]):
    """``num_files * edits`` prompts in a seeded order, cycled up to the count asked."""

    kind: ClassVar[str] = "code_edit"

    def requests(self, ds: CodeEditDataset, draw: Draw) -> tuple[BenchRequest, ...]:
        content = np.random.default_rng([draw.seed, draw.round])
        idioms = token_ids(content, ds.idioms * ds.line_len, ds.vocab_size)
        idioms = idioms.reshape(ds.idioms, ds.line_len)
        # From the seed alone, as every dataset's shapes: each tier sends the same sizes. The
        # output lengths come from a stream of their own, so asking for them moves no file.
        lengths = spread(
            np.random.default_rng(draw.seed), ds.file_len, ds.range_ratio, ds.num_files
        )
        outs = iter(_output_lengths(ds, draw.seed).tolist())
        reqs = [
            req
            for f, n in enumerate(lengths)
            for req in _edits(ds, draw, content, idioms, f, int(n), outs)
        ]
        order = np.random.default_rng(draw.seed).permutation(len(reqs)) if ds.shuffle else None
        ordered = [reqs[int(i)] for i in order] if order is not None else reqs
        return tuple(ordered[i % len(ordered)] for i in range(draw.count))


def _output_lengths(ds: CodeEditDataset, seed: int) -> np.ndarray:
    """One output length per edit request, in the order the requests are written."""
    rng = np.random.default_rng([seed, 1])
    return spread(rng, ds.output_len, ds.output_range_ratio, ds.num_files * ds.edits)


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
    outs: Iterator[int],
) -> list[BenchRequest]:
    # The file is drawn before its edit requests: the content stream's order fixes each prompt.
    file = _file(ds, content, idioms, n)
    out = []
    for _ in range(ds.edits):
        ids = np.concatenate([file, token_ids(content, ds.request_len, ds.vocab_size)])
        key = f"file-{draw.round}-{f}"
        out.append(BenchRequest(render(ids, draw.as_ids), len(ids), next(outs), key, n))
    return out
