"""The model writer: deterministic bytes, a file the gguf reader understands, the logit bias."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from gguf import GGUFReader

TINY = {"layers": 2, "hidden": 64, "ffn": 128, "heads": 4, "kv_heads": 2, "ctx": 512}


def _write(mod: ModuleType, path: Path, seed: int = 0, eos: str = "ban") -> Path:
    return mod.write_model(path, mod.Shape(**TINY), seed, eos)


def _field(reader: GGUFReader, key: str) -> object:
    return reader.fields[key].contents()


def _bias_column(reader: GGUFReader) -> np.ndarray:
    (output,) = [t for t in reader.tensors if t.name == "output.weight"]
    return np.asarray(output.data, dtype=np.float32)[:, 0]


def test_same_seed_writes_same_bytes(gguf_script: ModuleType, tmp_path: Path) -> None:
    a = _write(gguf_script, tmp_path / "a.gguf", seed=7).read_bytes()
    b = _write(gguf_script, tmp_path / "b.gguf", seed=7).read_bytes()
    c = _write(gguf_script, tmp_path / "c.gguf", seed=8).read_bytes()
    assert a == b
    assert a != c and len(a) == len(c)


def test_reader_sees_a_llama_model(gguf_script: ModuleType, tmp_path: Path) -> None:
    reader = GGUFReader(_write(gguf_script, tmp_path / "m.gguf"))
    assert _field(reader, "general.architecture") == "llama"
    assert _field(reader, "llama.block_count") == 2
    assert _field(reader, "llama.attention.head_count_kv") == 2
    assert _field(reader, "llama.attention.layer_norm_rms_epsilon") == pytest.approx(1e-5)
    assert _field(reader, "tokenizer.ggml.model") == "gpt2"
    assert "<|im_start|>" in str(_field(reader, "tokenizer.chat_template"))
    tokens = _field(reader, "tokenizer.ggml.tokens")
    assert isinstance(tokens, list) and tokens[-3:] == [
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
    ]
    assert len(_field(reader, "tokenizer.ggml.merges")) == len(tokens) - 256 - 3  # type: ignore[arg-type]
    names = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors}
    assert len(names) == 3 + 9 * 2
    assert names["blk.1.attn_k.weight"] == (64, 32)  # GGUF order: (in, out)
    assert names["output.weight"] == (64, len(tokens))


def test_bias_bans_control_and_unprintable_tokens(gguf_script: ModuleType, tmp_path: Path) -> None:
    reader = GGUFReader(_write(gguf_script, tmp_path / "m.gguf"))
    bias = _bias_column(reader)
    vocab = gguf_script.build_vocab()
    banned = {
        i
        for i, b in enumerate(vocab.token_bytes)
        if b is None or not all(0x20 <= c < 0x7F and c != ord("<") for c in b)
    }
    assert {int(i) for i in np.flatnonzero(bias < 0)} == banned
    assert banned >= {ord("\n"), 0xE2, vocab.id_of("<|im_end|>"), vocab.id_of("<|endoftext|>")}
    assert np.all(bias[[ord("a"), ord(" "), vocab.id_of("th")]] == 0)


def test_eos_favour_makes_end_of_turn_likeliest(gguf_script: ModuleType, tmp_path: Path) -> None:
    reader = GGUFReader(_write(gguf_script, tmp_path / "m.gguf", eos="favour"))
    bias = _bias_column(reader)
    assert int(np.argmax(bias)) == gguf_script.build_vocab().id_of("<|im_end|>")
    assert bias.max() > 0


def test_no_layer_writes_the_constant_channel(gguf_script: ModuleType) -> None:
    shape = gguf_script.Shape(**TINY)
    tensors = gguf_script.make_tensors(shape, gguf_script.build_vocab(), 0, "ban")
    writers = [
        v for k, v in tensors.items() if k.endswith(("attn_output.weight", "ffn_down.weight"))
    ]
    assert len(writers) == 4 and all(not w[0].any() for w in writers)
    assert np.all(tensors["token_embd.weight"][:, 0] == np.float16(8.0))  # sqrt(64)


def test_rejects_heads_that_do_not_divide(gguf_script: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="divide"):
        gguf_script.write_model(tmp_path / "m.gguf", gguf_script.Shape(**{**TINY, "heads": 3}), 0)
    assert not list(tmp_path.iterdir())


def test_cli_small_preset_with_override(
    gguf_script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sub" / "s.gguf"
    assert gguf_script.main(["--out", str(out), "--preset", "small", "--layers", "1"]) == 0
    assert str(out) in capsys.readouterr().out
    reader = GGUFReader(out)
    assert _field(reader, "llama.block_count") == 1
    assert _field(reader, "llama.embedding_length") == 256
