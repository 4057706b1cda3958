"""``long_prompt``: long single prompts (e.g. one 150K-token sequence), each one distinct."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from objectives.datasets._base import Dataset, Draw
from objectives.datasets._synthetic import render, token_ids
from objectives.records import BenchRequest
from objectives.workload import LongPromptDataset


class LongPrompt(Dataset[LongPromptDataset]):
    """Every request ``input_len`` tokens of fresh content and ``output_len`` tokens out."""

    kind: ClassVar[str] = "long_prompt"

    def requests(self, ds: LongPromptDataset, draw: Draw) -> tuple[BenchRequest, ...]:
        content = np.random.default_rng([draw.seed, draw.round])
        return tuple(
            BenchRequest(
                render(token_ids(content, ds.input_len, ds.vocab_size), draw.as_ids),
                ds.input_len,
                ds.output_len,
            )
            for _ in range(draw.count)
        )
