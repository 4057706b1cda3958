"""Which token ids a synthetic ``/v1/completions`` prompt may hold: the served model's own.

vLLM refuses a prompt holding an id outside its vocabulary (``Token id N is out of
vocabulary``), so random prompts are drawn inside the vocabulary of the model being served, as
``vllm bench serve`` draws them with that model's tokenizer. This module is the one place that
finds it; the first answer wins:

1. the workload's explicit ``vocab_size`` (``tune bench --vocab-size``);
2. the workload's ``tokenizer`` (``--tokenizer``): a local HF tokenizer folder or
   ``tokenizer.json``, read as JSON (no ``transformers`` needed);
3. the model name, when it is a local folder (or a Hugging Face cache snapshot): its
   ``tokenizer.json`` and ``config.json`` (``vocab_size``);
4. the server: ``GET /v1/models`` lists ``root``, the folder vLLM loaded, read as in 3
   (llama.cpp lists ``meta.n_vocab`` instead).

Ids stay at or above 100 (specials of most vocabularies; 0 for a vocabulary too small for it)
and below the first added/special token after that (``<|im_end|>``...), so no control token
lands in a prompt. When nothing is found the old default applies (ids below 32000) and one
warning per process names where it looked. Chat prompts are words, and the simulator has no
vocabulary: both keep that default without looking.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from objectives.answer import fetch_sync
from objectives.client import server_root
from objectives.endpoint import auth_headers
from objectives.workload import ShareGPTDataset, WorkloadSpec
from tuner.errors import SetupError

FIRST_ID = 100  # low ids are special tokens in most vocabularies
DEFAULT_VOCAB = 32000  # the bound when no vocabulary is known (and for chat / the simulator)
_SERVER_TIMEOUT_S = 10.0
_log = logging.getLogger(__name__)
_warned: set[str] = set()


class Served(Protocol):
    """What is asked of an endpoint here (measuring sees an endpoint, never a launcher)."""

    @property
    def model(self) -> str: ...

    @property
    def base_url(self) -> str | None: ...

    @property
    def api_key(self) -> str | None: ...


@dataclass(frozen=True)
class Vocab:
    """What is known of a model's vocabulary: its size, its added tokens, where it was read."""

    size: int  # every id below it is in the vocabulary
    added: frozenset[int] = frozenset()  # added / special token ids
    source: str = ""

    def id_bound(self) -> int:
        """Exclusive upper bound of random ids: the end of the longest run of ordinary ids."""
        start = best_start = best_end = id_floor(self.size)
        for cut in [*sorted(i for i in self.added if start <= i < self.size), self.size]:
            if cut - start > best_end - best_start:
                best_start, best_end = start, cut
            start = cut + 1
        return best_end if best_end > best_start else self.size


def id_floor(bound: int) -> int:
    """The lowest random id below ``bound``: 100, unless the vocabulary is too small for it."""
    return FIRST_ID if bound > 2 * FIRST_ID else 0


def with_vocab(
    workload: WorkloadSpec, endpoint: Served, base_dir: Path | None = None
) -> WorkloadSpec:
    """``workload`` with its dataset's ``vocab_size`` found for ``endpoint`` when left unset.

    Raises:
        SetupError: the workload names a tokenizer that cannot be read.
    """
    ds = workload.dataset
    if not _needs_vocab(workload) or endpoint.base_url is None:
        return workload
    tokenizer = _relative(workload.tokenizer, base_dir)
    vocab, looked = find_vocab(tokenizer, endpoint.model, endpoint.base_url, endpoint.api_key)
    bound = vocab.id_bound() if vocab is not None else _fallback(endpoint.model, looked)
    return workload.model_copy(update={"dataset": ds.model_copy(update={"vocab_size": bound})})


def _needs_vocab(workload: WorkloadSpec) -> bool:
    # Chat prompts are words: ids there only pick words, from the default range as before.
    ds = workload.dataset
    if isinstance(ds, ShareGPTDataset) or workload.endpoint != "completions":
        return False
    return ds.vocab_size is None


def _relative(path: Path | None, base_dir: Path | None) -> Path | None:
    if path is None or path.is_absolute() or base_dir is None:
        return path
    return base_dir / path


def _fallback(model: str, looked: list[str]) -> int:
    message = (
        f"warning: no vocabulary found for model {model!r} (looked at: {'; '.join(looked)}); "
        f"random token ids come from [{FIRST_ID}, {DEFAULT_VOCAB}): set the workload's "
        "vocab_size or tokenizer (tune bench --vocab-size / --tokenizer) if the server refuses them"
    )
    if message not in _warned:
        _warned.add(message)
        _log.warning(message)
    return DEFAULT_VOCAB


def find_vocab(
    tokenizer: Path | None, model: str, base_url: str | None, api_key: str | None = None
) -> tuple[Vocab | None, list[str]]:
    """The vocabulary, first found wins (see the module docstring), and where it looked.

    Raises:
        SetupError: ``tokenizer`` is given but cannot be read.
    """
    if tokenizer is not None:
        return _named_tokenizer(tokenizer), [f"tokenizer {tokenizer}"]
    folder = local_model_folder(model)
    looked = [f"model folder {model!r}" + ("" if folder else " (not a local folder)")]
    vocab = read_model_folder(folder) if folder is not None else None
    if vocab is None and base_url is not None:
        vocab, note = query_server(base_url, model, api_key)
        looked.append(note)
    return vocab, looked


def _named_tokenizer(path: Path) -> Vocab:
    vocab = read_tokenizer(path)
    if vocab is None:
        raise SetupError(
            f"tokenizer {path}: not a tokenizer.json or a folder holding one (or vocab.json)"
        )
    return vocab


def local_model_folder(name: str) -> Path | None:
    """``name`` as a local folder: a path, or its snapshot in the Hugging Face cache."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if name.count("/") != 1 or name.startswith(("/", ".")):
        return None
    snapshots = _hub_cache() / f"models--{name.replace('/', '--')}" / "snapshots"
    found = [p for p in snapshots.glob("*") if p.is_dir()] if snapshots.is_dir() else []
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _hub_cache() -> Path:
    if "HF_HUB_CACHE" in os.environ:
        return Path(os.environ["HF_HUB_CACHE"])
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    return home / "hub"


def read_model_folder(folder: Path) -> Vocab | None:
    """A model folder's vocabulary: its tokenizer, capped by ``config.json``'s ``vocab_size``."""
    tok, size = read_tokenizer(folder), _config_vocab_size(folder / "config.json")
    if tok is None:
        return Vocab(size, source=str(folder / "config.json")) if size else None
    return Vocab(min(tok.size, size or tok.size), tok.added, tok.source)


def _config_vocab_size(path: Path) -> int | None:
    data = _read_json(path)
    if not isinstance(data, dict):
        return None
    size = data.get("vocab_size", (data.get("text_config") or {}).get("vocab_size"))
    return size if isinstance(size, int) and size > 0 else None


# What ``read_tokenizer`` reads of a tokenizer folder.
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "tokenizer_config.json")


def read_tokenizer(path: Path) -> Vocab | None:
    """A ``tokenizer.json`` (or a folder with one, or with ``vocab.json``): size = every id."""
    if path.is_dir():
        found = read_tokenizer(path / "tokenizer.json")
        return found if found is not None else _read_vocab_json(path)
    data = _read_json(path)
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(model, dict):
        return None
    vocab = model.get("vocab")
    ids = range(len(vocab)) if isinstance(vocab, list) else _ids(vocab)  # Unigram: a list
    return _vocab(ids, _added(data), path)


def _read_vocab_json(folder: Path) -> Vocab | None:
    # Slow-tokenizer folders: vocab.json plus tokenizer_config.json's added_tokens_decoder.
    vocab = _read_json(folder / "vocab.json")
    if not isinstance(vocab, dict):
        return None
    config = _read_json(folder / "tokenizer_config.json")
    decoder = config.get("added_tokens_decoder") if isinstance(config, dict) else None
    added = [int(k) for k in decoder if k.isdigit()] if isinstance(decoder, dict) else []
    return _vocab(_ids(vocab), frozenset(added), folder / "vocab.json")


def _added(data: dict[str, Any]) -> frozenset[int]:
    tokens = data.get("added_tokens")
    entries = [t for t in tokens if isinstance(t, dict)] if isinstance(tokens, list) else []
    return _ids({i: t.get("id") for i, t in enumerate(entries)})


def _ids(mapping: Any) -> frozenset[int]:
    values = mapping.values() if isinstance(mapping, dict) else []
    return frozenset(v for v in values if isinstance(v, int) and not isinstance(v, bool))


def _vocab(ids: range | frozenset[int], added: frozenset[int], path: Path) -> Vocab | None:
    top = max([*([max(ids)] if ids else []), *added], default=-1)
    return Vocab(top + 1, added, str(path)) if top >= 0 else None


def _read_json(path: Path) -> Any:
    try:
        stat = path.stat()
    except OSError:
        return None
    return _parse_json(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _parse_json(path: str, _mtime: int, _size: int) -> Any:
    # Cached by (path, mtime, size): every trial of a study reads the same tokenizer.json.
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def query_server(base_url: str, model: str, api_key: str | None = None) -> tuple[Vocab | None, str]:
    """The vocabulary of the model a server lists in ``/v1/models``, and what was seen there."""
    url = f"{server_root(base_url)}/v1/models"
    try:
        resp = fetch_sync("GET", url, _SERVER_TIMEOUT_S, auth_headers(api_key))
        entry = _listed(resp.json(), model) if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, RecursionError):  # nested past json's depth: a bad answer
        return None, f"GET {url} (no answer)"
    if entry is None:
        return None, f"GET {url} (no model listed)"
    return _from_entry(entry, f"GET {url}")


def _listed(data: Any, model: str) -> dict[str, Any] | None:
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == model]
    return (named or entries or [None])[0]


def _from_entry(entry: dict[str, Any], where: str) -> tuple[Vocab | None, str]:
    root = entry.get("root")
    folder = local_model_folder(root) if isinstance(root, str) and root else None
    vocab = read_model_folder(folder) if folder is not None else None
    if vocab is not None:
        return vocab, f"{where} root {root!r}"
    meta = entry.get("meta")
    n_vocab = meta.get("n_vocab") if isinstance(meta, dict) else None
    if isinstance(n_vocab, int) and n_vocab > 0:
        return Vocab(n_vocab, source=f"{where} meta.n_vocab"), f"{where} meta.n_vocab"
    shown = f"root {root!r} is not a readable local folder" if root else "no root listed"
    return None, f"{where} ({shown})"
