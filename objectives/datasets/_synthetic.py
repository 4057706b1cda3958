"""Content and lengths of synthetic prompts, shared by the token-id datasets.

Token ids are drawn below the dataset's ``vocab_size`` (``objectives.vocab`` finds it for the
served model); for chat they are rendered as space-separated common words, about one token per
word, so a chat prompt has roughly the length asked for.
"""

from __future__ import annotations

import numpy as np

from objectives.vocab import DEFAULT_VOCAB, id_floor

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


def render(ids: np.ndarray, as_ids: bool) -> str | list[int]:
    """The prompt as sent: the ids themselves, or one word per id for chat."""
    if as_ids:
        return ids.tolist()
    return "".join(_WORDS[ids % len(_WORDS)])


def token_ids(rng: np.random.Generator, n: int, vocab_size: int | None) -> np.ndarray:
    """``n`` ids inside the vocabulary, above its special tokens."""
    # Unset (chat, the simulator, a caller that did not resolve it): the old default.
    bound = vocab_size or DEFAULT_VOCAB
    return rng.integers(id_floor(bound), bound, size=n, dtype=np.int64)


def spread(rng: np.random.Generator, length: int, ratio: float, count: int) -> np.ndarray:
    """``count`` lengths as ``vllm bench serve``'s range ratio draws them: uniform integers in
    ``[length * (1 - ratio), length * (1 + ratio)]``, never below 1."""
    low = max(1, int(length * (1 - ratio)))
    high = max(low, int(length * (1 + ratio)))
    return rng.integers(low, high + 1, size=count)
