"""``sharegpt``: real conversations, the first human turn as prompt, its reply as output length.

The prompts are real text and stay the same in every tier (as repeated ``vllm bench serve`` runs
send them); the seed fixes which conversations are sent and in what order. Files are JSON lists
or JSONL, turns ``{"from", "value"}`` or ``{"role", "content"}``, parsed once per process for a
given file version.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from objectives.datasets._base import Dataset, Draw
from objectives.records import BenchRequest
from objectives.workload import ShareGPTDataset
from tuner.errors import DatasetError


class ShareGPT(Dataset[ShareGPTDataset]):
    """A seeded choice of the file's usable conversations."""

    kind: ClassVar[str] = "sharegpt"

    def requests(self, ds: ShareGPTDataset, draw: Draw) -> tuple[BenchRequest, ...]:
        return _pick(ds, draw, skip=0)

    def warmup(self, ds: ShareGPTDataset, draw: Draw) -> tuple[BenchRequest, ...]:
        # The conversations after the measured ones: warm-up warms no prefix they use.
        return _pick(ds, draw, skip=draw.measured)


def _pick(ds: ShareGPTDataset, draw: Draw, skip: int) -> tuple[BenchRequest, ...]:
    path = _resolve(ds.path, draw.base_dir)
    usable = [c for c in _load_conversations(path, ds.chars_per_token) if _keep(ds, c)]
    if not usable:
        raise DatasetError(f"{path}: no usable conversation (min_len {ds.min_len})")
    if skip == 0 and draw.count > len(usable):
        raise DatasetError(
            f"{path}: {len(usable)} usable conversations, the workload needs {draw.count}"
        )
    order = np.random.default_rng(draw.seed).permutation(len(usable))
    picks = [usable[int(order[(skip + i) % len(usable)])] for i in range(draw.count)]
    return tuple(BenchRequest(c.prompt, c.prompt_len, _output_len(ds, c.output_len)) for c in picks)


def _resolve(path: Path, base_dir: Path | None) -> Path:
    return path if path.is_absolute() or base_dir is None else base_dir / path


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
    except RecursionError:
        raise DatasetError(f"{path}: nested deeper than a conversation ever is") from None
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
            except RecursionError:
                raise DatasetError(
                    f"{path}:{n}: nested deeper than a conversation ever is"
                ) from None
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
