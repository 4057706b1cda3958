"""Turn a ``WorkloadSpec`` into the exact list of requests every trial sends.

Determinism: lengths and order come from ``seed`` alone; the content of synthetic prompts comes
from ``(seed, round)``. The runner passes ``round=i`` for tier ``i`` so every tier has the same
shapes in the same order but fresh content: a later tier does not hit prefix-cache blocks that
an earlier tier left behind, except where the dataset shares prefixes on purpose. ShareGPT
prompts are real text and stay the same in every tier (as repeated ``vllm bench serve`` runs).

Synthetic prompts are token ids for ``/v1/completions`` (exact lengths, as ``vllm bench serve``
sends them), drawn below the dataset's ``vocab_size`` (``objectives.vocab`` finds it for the
served model), and space-separated common words for chat (about one token per word).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from objectives.records import BenchRequest
from objectives.vocab import DEFAULT_VOCAB, id_floor
from objectives.workload import (
    LongPromptDataset,
    PrefixRepetitionDataset,
    RandomDataset,
    ShareGPTDataset,
    WorkloadSpec,
)
from tuner.errors import DatasetError

WARMUP_ROUND = 1_000_003  # content round of warm-up requests: never a tier's round
_WORD_TEXT = (
    "the of and to in is it you that he was for on are with as his they be at one have"
    " this from or had by word but what some we can out other were all there when up"
    " use your how said an each she which do their time if will way about many then"
    " them write would like so these her long make thing see him two has look more day"
    " could go come did number sound no most people my over know water than call first"
    " who may down side been now find any new work part take get place made live where"
    " after back little only round man year came show every good me give our under name"
)
# Common English words: about one token each in the usual BPE vocabularies.
_WORDS = np.array([" " + w for w in _WORD_TEXT.split()], dtype=object)


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


def _dir_key(base_dir: Path | None) -> str:
    return str(base_dir.resolve()) if base_dir is not None else ""


@functools.lru_cache(maxsize=64)
def _cached(spec_json: str, base_dir: str, round: int, count: int) -> tuple[BenchRequest, ...]:
    # Keyed on the spec's JSON: a 60 x 96K-token workload is built once per process.
    spec = WorkloadSpec.model_validate_json(spec_json)
    ds = spec.dataset
    as_ids = spec.endpoint == "completions"
    if isinstance(ds, RandomDataset):
        return _random(ds, spec.seed, round, count, as_ids)
    if isinstance(ds, PrefixRepetitionDataset):
        return _prefix_repetition(ds, spec.seed, round, count, as_ids)
    if isinstance(ds, LongPromptDataset):
        return _long_prompt(ds, spec.seed, round, count, as_ids)
    # Warm-up takes the conversations after the measured ones: it warms no prefix they use.
    skip = spec.requests_per_tier if round == WARMUP_ROUND else 0
    return _sharegpt(ds, spec.seed, count, skip, Path(base_dir) if base_dir else None)


def _render(ids: np.ndarray, as_ids: bool) -> str | list[int]:
    if as_ids:
        return ids.tolist()
    return "".join(_WORDS[ids % len(_WORDS)])


def _ids(rng: np.random.Generator, n: int, vocab_size: int | None) -> np.ndarray:
    # Unset (chat, the simulator, a caller that did not resolve it): the old default.
    bound = vocab_size or DEFAULT_VOCAB
    return rng.integers(id_floor(bound), bound, size=n, dtype=np.int64)


def _random(
    ds: RandomDataset, seed: int, round: int, count: int, as_ids: bool
) -> tuple[BenchRequest, ...]:
    shapes = np.random.default_rng(seed)
    ins = _spread(shapes, ds.input_len, ds.range_ratio, count)
    outs = _spread(shapes, ds.output_len, ds.range_ratio, count)
    content = np.random.default_rng([seed, round])
    prefix = _ids(content, ds.prefix_len, ds.vocab_size)
    key = f"random-{round}" if ds.prefix_len else None
    out = []
    for n_in, n_out in zip(ins, outs, strict=True):
        ids = np.concatenate([prefix, _ids(content, int(n_in), ds.vocab_size)])
        out.append(BenchRequest(_render(ids, as_ids), len(ids), int(n_out), key, ds.prefix_len))
    return tuple(out)


def _spread(rng: np.random.Generator, length: int, ratio: float, count: int) -> np.ndarray:
    # As vllm bench serve: uniform integers in [len*(1-r), len*(1+r)], never below 1.
    low = max(1, int(length * (1 - ratio)))
    high = max(low, int(length * (1 + ratio)))
    return rng.integers(low, high + 1, size=count)


def _prefix_repetition(
    ds: PrefixRepetitionDataset, seed: int, round: int, count: int, as_ids: bool
) -> tuple[BenchRequest, ...]:
    content = np.random.default_rng([seed, round])
    reqs = []
    for p in range(ds.num_prefixes):
        prefix = _ids(content, ds.prefix_len, ds.vocab_size)
        for _ in range(ds.repeats):
            ids = np.concatenate([prefix, _ids(content, ds.suffix_len, ds.vocab_size)])
            reqs.append(
                BenchRequest(
                    _render(ids, as_ids),
                    len(ids),
                    ds.output_len,
                    f"prefix-{round}-{p}",
                    ds.prefix_len,
                )
            )
    order = np.random.default_rng(seed).permutation(len(reqs)) if ds.shuffle else range(len(reqs))
    ordered = [reqs[int(i)] for i in order]
    return tuple(ordered[i % len(ordered)] for i in range(count))


def _long_prompt(
    ds: LongPromptDataset, seed: int, round: int, count: int, as_ids: bool
) -> tuple[BenchRequest, ...]:
    content = np.random.default_rng([seed, round])
    return tuple(
        BenchRequest(
            _render(_ids(content, ds.input_len, ds.vocab_size), as_ids),
            ds.input_len,
            ds.output_len,
        )
        for _ in range(count)
    )


def _sharegpt(
    ds: ShareGPTDataset, seed: int, count: int, skip: int, base_dir: Path | None
) -> tuple[BenchRequest, ...]:
    path = ds.path if ds.path.is_absolute() or base_dir is None else base_dir / ds.path
    usable = [c for c in _load_conversations(path, ds.chars_per_token) if _keep(ds, c)]
    if not usable:
        raise DatasetError(f"{path}: no usable conversation (min_len {ds.min_len})")
    if skip == 0 and count > len(usable):
        raise DatasetError(
            f"{path}: {len(usable)} usable conversations, the workload needs {count}"
        )
    order = np.random.default_rng(seed).permutation(len(usable))
    picks = [usable[int(order[(skip + i) % len(usable)])] for i in range(count)]
    return tuple(BenchRequest(c.prompt, c.prompt_len, _output_len(ds, c.output_len)) for c in picks)


def _keep(ds: ShareGPTDataset, conv: Conversation) -> bool:
    if conv.prompt_len < ds.min_len or (ds.output_len is None and conv.output_len < ds.min_len):
        return False
    return ds.max_prompt_len is None or conv.prompt_len <= ds.max_prompt_len


def _output_len(ds: ShareGPTDataset, reply_len: int) -> int:
    if ds.output_len is not None:
        return ds.output_len
    return min(reply_len, ds.max_output_len) if ds.max_output_len else reply_len


@dataclass(frozen=True, slots=True)
class Conversation:
    """The first human turn of one conversation and the length of the reply to it."""

    prompt: str
    prompt_len: int
    output_len: int


def _load_conversations(path: Path, chars_per_token: float) -> tuple[Conversation, ...]:
    try:
        stat = path.stat()
    except OSError as err:
        raise DatasetError(f"{path}: cannot read dataset ({err.strerror})") from None
    return _parse_file(str(path), stat.st_mtime_ns, stat.st_size, chars_per_token)


@functools.lru_cache(maxsize=8)
def _parse_file(
    path: str, _mtime: int, _size: int, chars_per_token: float
) -> tuple[Conversation, ...]:
    entries = _read_entries(Path(path))
    convs = []
    for i, entry in enumerate(entries):
        turns = _turns(entry)
        if turns is None:
            raise DatasetError(f"{path}: entry {i} has no 'conversations' or 'messages' list")
        conv = _first_exchange(turns, chars_per_token)
        if conv is not None:
            convs.append(conv)
    return tuple(convs)


def _read_entries(path: Path) -> list[Any]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = _read_jsonl(path, text)
    if isinstance(data, dict):
        data = [data]  # a one-line JSONL file parses as one object
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list or JSONL of conversations")
    return data


def _read_jsonl(path: Path, text: str) -> list[Any]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise DatasetError(f"{path}:{n}: not JSON or JSONL ({err.msg})") from None
    return out


def _turns(entry: Any) -> list[Any] | None:
    if not isinstance(entry, dict):
        return None
    turns = entry.get("conversations", entry.get("messages"))
    return turns if isinstance(turns, list) else None


def _first_exchange(turns: list[Any], chars_per_token: float) -> Conversation | None:
    # The first human turn is the prompt; the turn after it is the reference reply.
    for i, turn in enumerate(turns[:-1]):
        if _speaker(turn) in _HUMAN:
            prompt, reply = _text(turn), _text(turns[i + 1])
            return Conversation(
                prompt,
                _tokens(turn, prompt, chars_per_token),
                _tokens(turns[i + 1], reply, chars_per_token),
            )
    return None


_HUMAN = frozenset({"human", "user"})


def _speaker(turn: Any) -> str | None:
    return turn.get("from", turn.get("role")) if isinstance(turn, dict) else None


def _text(turn: Any) -> str:
    value = turn.get("value", turn.get("content", "")) if isinstance(turn, dict) else ""
    return value if isinstance(value, str) else ""


def _tokens(turn: dict[str, Any], text: str, chars_per_token: float) -> int:
    count = turn.get("token_count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    return max(1, round(len(text) / chars_per_token)) if text else 0
