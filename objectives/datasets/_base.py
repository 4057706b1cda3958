"""The dataset contract: how a workload's ``dataset:`` becomes the requests a trial sends.

Each dataset kind (the ``kind:`` of a space file's ``workload.dataset``, validated by its
pydantic model in ``objectives.workload``) has one implementation: a ``Dataset`` subclass in its
own module of this package, registered by kind in ``objectives.datasets.DATASETS``. Callers
never pick an implementation themselves; ``build_requests`` and ``build_warmup`` do, by kind.

An implementation provides:

- ``requests(ds, draw)``: the ``draw.count`` measured requests of the tier whose content round
  is ``draw.round`` (the runner passes round ``i`` for tier ``i``).
- ``warmup(ds, draw)``: ``draw.count`` warm-up requests, sent before the first tier and never
  measured. Its ``draw.round`` is ``WARMUP_ROUND``, a round no tier uses; the default returns
  that round's requests, which suits datasets whose content comes from the round. A dataset
  drawn from a fixed pool (ShareGPT) overrides it to take entries the tiers do not.

Rules every implementation keeps (tests/objectives/test_dataset_contract.py checks each
registered kind):

- Count: exactly ``draw.count`` requests, in the order they are to be sent.
- Determinism: the same settings and ``draw`` give equal requests in every process, so every
  trial sends the same load. Lengths and order come from ``draw.seed`` alone (every tier has the
  same shapes); synthetic content comes from ``(seed, round)``, so a later tier does not hit
  prefix-cache blocks an earlier one left behind except where the dataset shares prefixes on
  purpose. Another seed gives other requests wherever the dataset has a choice to make.
- Warm-up is disjoint: no warm-up prompt is a measured prompt, so warming up never fills a
  cache the measurement then hits (a fixed pool wraps round only when it is too small).
- Prompts: token ids for ``/v1/completions`` (``draw.as_ids``, exact lengths, as
  ``vllm bench serve`` sends them) and text for chat; ``prompt_len`` is the prompt's length.
- Errors: a dataset that cannot give the requests asked for (file missing, malformed, too few
  usable entries) raises ``tuner.errors.DatasetError`` naming the file and what is wrong.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel

from objectives.records import BenchRequest

WARMUP_ROUND = 1_000_003  # content round of warm-up requests: never a tier's round

Spec = TypeVar("Spec", bound=BaseModel)


@dataclass(frozen=True)
class Draw:
    """What one build asks of a dataset, besides the dataset's own settings."""

    seed: int
    round: int
    count: int
    as_ids: bool  # token-id prompts (/v1/completions) rather than text (chat)
    base_dir: Path | None  # where relative dataset paths are resolved
    measured: int  # measured requests per tier: a fixed pool's warm-up comes after them


class Dataset(ABC, Generic[Spec]):
    """One dataset kind; see the module docstring for the contract."""

    kind: ClassVar[str]

    @abstractmethod
    def requests(self, ds: Spec, draw: Draw) -> tuple[BenchRequest, ...]:
        """The measured requests of round ``draw.round``."""

    def warmup(self, ds: Spec, draw: Draw) -> tuple[BenchRequest, ...]:
        """Warm-up requests (``draw.round`` is ``WARMUP_ROUND``)."""
        return self.requests(ds, draw)
