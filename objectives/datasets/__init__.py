"""Turn a ``WorkloadSpec`` into the exact list of requests every trial sends.

One implementation per dataset kind, chosen by the spec's ``kind`` through the plain dict
``DATASETS``; ``objectives.datasets._base`` states what an implementation must provide. Builds
are cached per process, keyed on the spec's JSON: a 60 x 96K-token workload is built once.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

from objectives.datasets._base import WARMUP_ROUND, Dataset, Draw
from objectives.datasets.code_edit import CodeEdit
from objectives.datasets.long_prompt import LongPrompt
from objectives.datasets.outputs import respread
from objectives.datasets.prefix_repetition import PrefixRepetition
from objectives.datasets.random import RandomTokens
from objectives.datasets.sharegpt import ShareGPT
from objectives.records import BenchRequest
from objectives.vocab import TOKENIZER_FILES
from objectives.workload import WorkloadSpec
from tuner.errors import DatasetError

# In the order the kinds are offered to users (``tune bench --dataset``, error messages).
DATASETS: dict[str, Dataset[Any]] = {
    impl.kind: impl
    for impl in (RandomTokens(), ShareGPT(), PrefixRepetition(), CodeEdit(), LongPrompt())
}
DATASET_KINDS: tuple[str, ...] = tuple(DATASETS)


def dataset(kind: str) -> Dataset[Any]:
    """The implementation of dataset ``kind``; an unknown kind names the valid ones."""
    try:
        return DATASETS[kind]
    except KeyError:
        valid = ", ".join(DATASET_KINDS)
        raise DatasetError(f"unknown dataset kind {kind!r}; valid kinds: {valid}") from None


def build_requests(
    spec: WorkloadSpec, base_dir: Path | None = None, round: int = 0
) -> list[BenchRequest]:
    """The ``num_prompts`` measured requests of one tier, the same for the same spec and round."""
    return list(_cached(spec.model_dump_json(), _dir_key(base_dir), round, spec.requests_per_tier))


def build_warmup(spec: WorkloadSpec, base_dir: Path | None = None) -> list[BenchRequest]:
    """``warmup`` requests shaped like the measured ones but sharing no content with them."""
    if spec.warmup == 0:
        return []
    return list(_cached(spec.model_dump_json(), _dir_key(base_dir), WARMUP_ROUND, spec.warmup))


def file_digests(spec: WorkloadSpec, base_dir: Path | None = None) -> dict[str, str]:
    """A digest of every file ``spec`` reads, by the name the space gives it ('missing' where
    none is): the dataset file, and the tokenizer (of a folder, the files a vocabulary is read
    from). Two runs send the same requests only when these agree as well as the spec does."""
    ds = spec.dataset
    named = [getattr(ds, "path", None), getattr(ds, "output_lengths_file", None), spec.tokenizer]
    out: dict[str, str] = {}
    for name in (n for n in named if n is not None):
        path = name if name.is_absolute() or base_dir is None else base_dir / name
        files = [path / f for f in TOKENIZER_FILES] if path.is_dir() else [path]
        for file in files:
            key = str(name / file.name) if file != path else str(name)
            out[key] = _digest(file)
    return out


def _digest(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()[:16]
    except FileNotFoundError:
        return "missing"
    except OSError as err:
        raise DatasetError(f"{path}: cannot read ({err.strerror})") from None


def _dir_key(base_dir: Path | None) -> str:
    return str(base_dir.resolve()) if base_dir is not None else ""


@functools.lru_cache(maxsize=64)
def _cached(spec_json: str, base_dir: str, round: int, count: int) -> tuple[BenchRequest, ...]:
    spec = WorkloadSpec.model_validate_json(spec_json)
    impl = dataset(spec.dataset.kind)
    draw = Draw(
        seed=spec.seed,
        round=round,
        count=count,
        as_ids=spec.endpoint == "completions",
        base_dir=Path(base_dir) if base_dir else None,
        measured=spec.requests_per_tier,
    )
    made = (
        impl.warmup(spec.dataset, draw)
        if round == WARMUP_ROUND
        else impl.requests(spec.dataset, draw)
    )
    return respread(made, spec.dataset, spec.seed, round, draw.base_dir)


__all__ = [
    "DATASETS",
    "DATASET_KINDS",
    "WARMUP_ROUND",
    "Dataset",
    "Draw",
    "build_requests",
    "build_warmup",
    "dataset",
]
