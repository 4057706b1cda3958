"""``prefix_repetition``: a few long prefixes, each sent several times (prefix-cache reuse)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from objectives.datasets._base import Dataset, Draw
from objectives.datasets._synthetic import render, token_ids
from objectives.records import BenchRequest
from objectives.workload import PrefixRepetitionDataset


class PrefixRepetition(Dataset[PrefixRepetitionDataset]):
    """``num_prefixes * repeats`` prompts in a seeded order, cycled up to the count asked."""

    kind: ClassVar[str] = "prefix_repetition"

    def requests(self, ds: PrefixRepetitionDataset, draw: Draw) -> tuple[BenchRequest, ...]:
        content = np.random.default_rng([draw.seed, draw.round])
        reqs = [req for p in range(ds.num_prefixes) for req in _group(ds, draw, content, p)]
        order = (
            np.random.default_rng(draw.seed).permutation(len(reqs))
            if ds.shuffle
            else range(len(reqs))
        )
        ordered = [reqs[int(i)] for i in order]
        return tuple(ordered[i % len(ordered)] for i in range(draw.count))


def _group(
    ds: PrefixRepetitionDataset, draw: Draw, content: np.random.Generator, p: int
) -> list[BenchRequest]:
    # The prefix is drawn before its suffixes: the content stream's order fixes every prompt.
    prefix = token_ids(content, ds.prefix_len, ds.vocab_size)
    out = []
    for _ in range(ds.repeats):
        ids = np.concatenate([prefix, token_ids(content, ds.suffix_len, ds.vocab_size)])
        prompt = render(ids, draw.as_ids)
        key = f"prefix-{draw.round}-{p}"
        out.append(BenchRequest(prompt, len(ids), ds.output_len, key, ds.prefix_len))
    return out
