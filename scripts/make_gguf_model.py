"""Write a small random-weight llama-architecture GGUF model that llama.cpp can serve.

No model hub is reachable from where `tune` is tested, so the model for the llama.cpp engine is
made here: byte-level BPE vocabulary (GPT-2 spelling) with a few hundred merges, ChatML control
tokens and chat template, F16 weights drawn from a seeded generator (same seed and shape, same
bytes), F32 norms.

The weights are random, but the output is shaped on purpose. Residual channel 0 holds the same
value for every token (the embedding sets it, no layer writes to it), so after the final
RMSNorm it is a near-constant input to the output projection and column 0 of ``output.weight``
acts as a per-token logit bias. That bias bans every token that is not printable ASCII (so one
generated token is one streamed chunk: no partial UTF-8 held back) and every control token (so
nothing ends a generation early and each request yields exactly ``max_tokens`` tokens).
``--eos favour`` instead makes end-of-turn the likeliest token, which tests ``ignore_eos``.

Usage:
    python scripts/make_gguf_model.py --out .cache/models/rand-8x512.gguf --seed 0
    python scripts/make_gguf_model.py --out /tmp/small.gguf --preset small
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from gguf import GGUFWriter

# `gguf` is imported only where a file is written: scripts/make_hf_model.py imports this module
# for its vocabulary and weights in vLLM's venv, which need not have `gguf`.
TOKEN_NORMAL, TOKEN_CONTROL = 1, 3  # gguf.TokenType.NORMAL / CONTROL

CONTROL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# Bytes a generated token may consist of. '<' is left out so that no output can look like the
# start of markup a chat parser holds back ("<think>", "<tool_call>").
ALLOWED_BYTES = frozenset(range(0x20, 0x7F)) - {ord("<")}
BAN = -10.0  # logit-bias weights; the constant channel scales them to ~±200 logits
FAVOUR = 10.0
CONST_CHANNEL = 0
WEIGHT_STD = 0.02  # small enough that the constant channel dominates every RMSNorm

PRESETS: dict[str, dict[str, int]] = {
    # ~57 MB: compute-bound enough on 2 CPU cores for server knobs to change its speed.
    "default": {"layers": 8, "hidden": 512, "ffn": 1536, "heads": 8, "kv_heads": 8, "ctx": 4096},
    # ~7 MB, loads in well under a second: for fast tests.
    "small": {"layers": 4, "hidden": 256, "ffn": 768, "heads": 4, "kv_heads": 4, "ctx": 2048},
}


@dataclass(frozen=True)
class Shape:
    """Hyper-parameters of the model to write."""

    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    ctx: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass(frozen=True)
class Vocab:
    """Byte-level BPE vocabulary: tokens in GPT-2 spelling, their types, merges, special ids."""

    tokens: list[str]
    types: list[int]
    merges: list[str]
    token_bytes: list[bytes | None]  # None for control tokens

    def id_of(self, token: str) -> int:
        return self.tokens.index(token)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's spelling of each byte as a printable character (as gguf.vocab and tokenizers')."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    spell = {b: chr(b) for b in printable}
    others = [b for b in range(256) if b not in spell]
    spell.update({b: chr(256 + n) for n, b in enumerate(others)})
    return spell


def build_vocab() -> Vocab:
    """256 byte tokens, merges of lowercase pairs and of space + letter, then control tokens."""
    spell = bytes_to_unicode()
    tokens = [spell[b] for b in range(256)]
    token_bytes: list[bytes | None] = [bytes([b]) for b in range(256)]
    letters = "abcdefghijklmnopqrstuvwxyz"
    pairs = [(" ", c) for c in letters] + [(a, b) for a in letters for b in letters]
    merges = []
    for left, right in pairs:
        lt, rt = spell[ord(left)], spell[ord(right)]
        merges.append(f"{lt} {rt}")
        tokens.append(lt + rt)
        token_bytes.append((left + right).encode())
    types = [TOKEN_NORMAL] * len(tokens)
    tokens += CONTROL_TOKENS
    types += [TOKEN_CONTROL] * len(CONTROL_TOKENS)
    token_bytes += [None] * len(CONTROL_TOKENS)
    return Vocab(tokens, types, merges, token_bytes)


def logit_bias(vocab: Vocab, eos: str) -> np.ndarray:
    """Column 0 of ``output.weight``: 0 for printable tokens, BAN for the rest."""
    allowed = [b is not None and all(c in ALLOWED_BYTES for c in b) for b in vocab.token_bytes]
    bias = np.where(np.array(allowed), 0.0, BAN).astype(np.float32)
    if eos == "favour":
        bias[vocab.id_of("<|im_end|>")] = FAVOUR
    return bias


def _normal(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape, dtype=np.float32) * WEIGHT_STD).astype(np.float16)


def _layer_tensors(rng: np.random.Generator, shape: Shape, i: int) -> dict[str, np.ndarray]:
    h, kv = shape.hidden, shape.kv_heads * shape.head_dim
    out = {
        f"blk.{i}.attn_norm.weight": np.ones(h, dtype=np.float32),
        f"blk.{i}.attn_q.weight": _normal(rng, h, h),
        f"blk.{i}.attn_k.weight": _normal(rng, kv, h),
        f"blk.{i}.attn_v.weight": _normal(rng, kv, h),
        f"blk.{i}.attn_output.weight": _normal(rng, h, h),
        f"blk.{i}.ffn_norm.weight": np.ones(h, dtype=np.float32),
        f"blk.{i}.ffn_gate.weight": _normal(rng, shape.ffn, h),
        f"blk.{i}.ffn_up.weight": _normal(rng, shape.ffn, h),
        f"blk.{i}.ffn_down.weight": _normal(rng, h, shape.ffn),
    }
    # No layer writes to the constant channel, so it reaches the output norm unchanged.
    out[f"blk.{i}.attn_output.weight"][CONST_CHANNEL, :] = 0
    out[f"blk.{i}.ffn_down.weight"][CONST_CHANNEL, :] = 0
    return out


def make_tensors(shape: Shape, vocab: Vocab, seed: int, eos: str) -> dict[str, np.ndarray]:
    """Every tensor of the model, in file order, drawn from one seeded generator."""
    rng = np.random.default_rng(seed)
    n_vocab = len(vocab.tokens)
    embd = _normal(rng, n_vocab, shape.hidden)
    # Constant channel at the scale of a whole unit-RMS vector: it dominates every RMSNorm.
    embd[:, CONST_CHANNEL] = np.sqrt(shape.hidden)
    tensors = {"token_embd.weight": embd}
    for i in range(shape.layers):
        tensors.update(_layer_tensors(rng, shape, i))
    output = _normal(rng, n_vocab, shape.hidden)
    output[:, CONST_CHANNEL] = logit_bias(vocab, eos).astype(np.float16)
    tensors["output_norm.weight"] = np.ones(shape.hidden, dtype=np.float32)
    tensors["output.weight"] = output
    return tensors


def _add_hparams(w: GGUFWriter, shape: Shape, n_vocab: int, seed: int) -> None:
    from gguf import LlamaFileType

    w.add_name(f"rand-llama-{shape.layers}x{shape.hidden}-seed{seed}")
    w.add_file_type(LlamaFileType.MOSTLY_F16)
    w.add_vocab_size(n_vocab)
    w.add_context_length(shape.ctx)
    w.add_embedding_length(shape.hidden)
    w.add_block_count(shape.layers)
    w.add_feed_forward_length(shape.ffn)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.kv_heads)
    w.add_rope_dimension_count(shape.head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)


def _add_tokenizer(w: GGUFWriter, vocab: Vocab) -> None:
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(vocab.tokens)
    w.add_token_types(vocab.types)
    w.add_token_merges(vocab.merges)
    w.add_bos_token_id(vocab.id_of("<|endoftext|>"))
    w.add_eos_token_id(vocab.id_of("<|im_end|>"))
    w.add_eot_token_id(vocab.id_of("<|im_end|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML_TEMPLATE)


def write_model(out: Path, shape: Shape, seed: int, eos: str = "ban") -> Path:
    """Write the model to ``out`` atomically (a reader never sees half a file)."""
    if shape.hidden % shape.heads or shape.heads % shape.kv_heads:
        raise ValueError("hidden must divide by heads, and heads by kv_heads")
    from gguf import GGUFWriter

    vocab = build_vocab()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    writer = GGUFWriter(tmp, "llama")
    _add_hparams(writer, shape, len(vocab.tokens), seed)
    _add_tokenizer(writer, vocab)
    for name, data in make_tensors(shape, vocab, seed, eos).items():
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="path of the .gguf file to write")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights (default 0)")
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="default",
        help="shape defaults: default 8x512 (~57 MB) or small 4x256 (~7 MB)",
    )
    for name in ("layers", "hidden", "ffn", "heads", "kv_heads", "ctx"):
        p.add_argument(
            f"--{name.replace('_', '-')}", type=int, help=f"override the preset's {name}"
        )
    p.add_argument(
        "--eos",
        choices=("ban", "favour"),
        default="ban",
        help="ban end-of-turn (exact lengths, default) or favour it (tests ignore_eos)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    dims = {k: getattr(args, k) or v for k, v in PRESETS[args.preset].items()}
    path = write_model(args.out, Shape(**dims), args.seed, args.eos)
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
