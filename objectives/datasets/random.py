"""``random``: prompts of seeded token lengths, as ``vllm bench serve --dataset-name random``."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from objectives.datasets._base import Dataset, Draw
from objectives.datasets._synthetic import render, spread, token_ids
from objectives.records import BenchRequest
from objectives.workload import RandomDataset


class RandomTokens(Dataset[RandomDataset]):
    """Lengths spread by ``range_ratio`` around the asked ones, an optional shared prefix."""

    kind: ClassVar[str] = "random"

    def requests(self, ds: RandomDataset, draw: Draw) -> tuple[BenchRequest, ...]:
        shapes = np.random.default_rng(draw.seed)
        ins = spread(shapes, ds.input_len, ds.range_ratio, draw.count)
        outs = spread(shapes, ds.output_len, ds.range_ratio, draw.count)
        content = np.random.default_rng([draw.seed, draw.round])
        prefix = token_ids(content, ds.prefix_len, ds.vocab_size)
        key = f"random-{draw.round}" if ds.prefix_len else None
        out = []
        for n_in, n_out in zip(ins, outs, strict=True):
            ids = np.concatenate([prefix, token_ids(content, int(n_in), ds.vocab_size)])
            prompt = render(ids, draw.as_ids)
            out.append(BenchRequest(prompt, len(ids), int(n_out), key, ds.prefix_len))
        return tuple(out)
