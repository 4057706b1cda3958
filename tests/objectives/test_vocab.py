from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from objectives import vocab
from objectives.datasets import build_requests
from objectives.endpoint import Endpoint
from objectives.vocab import Vocab, find_vocab, read_model_folder, read_tokenizer, with_vocab
from objectives.workload import WorkloadSpec
from tests.objectives.servers import vllm_like_server
from tuner.errors import SetupError

UNREACHABLE = "http://127.0.0.1:9"


def tokenizer_json(n_vocab: int, added: list[int], unigram: bool = False) -> dict[str, Any]:
    """A tokenizer.json shaped as HF tokenizers writes it: model vocab plus added tokens."""
    if unigram:
        model: dict[str, Any] = {
            "type": "Unigram",
            "vocab": [[f"t{i}", -1.0] for i in range(n_vocab)],
        }
    else:
        model = {"type": "BPE", "vocab": {f"t{i}": i for i in range(n_vocab)}, "merges": []}
    tokens = [{"id": i, "content": f"<|s{i}|>", "special": True} for i in added]
    return {"version": "1.0", "added_tokens": tokens, "model": model}


def model_folder(
    root: Path,
    n_vocab: int = 958,
    added: tuple[int, ...] = (958, 959, 960),
    config_vocab: int | None = 961,
) -> Path:
    """A local model folder like the tiny vLLM model of domain.md 7b (961 ids, 3 specials)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tokenizer.json").write_text(json.dumps(tokenizer_json(n_vocab, list(added))))
    if config_vocab is not None:
        (root / "config.json").write_text(json.dumps({"vocab_size": config_vocab}))
    return root


def workload(**dataset: object) -> WorkloadSpec:
    ds = {"kind": "random", "input_len": 64, "output_len": 4, **dataset}
    return WorkloadSpec.model_validate({"dataset": ds, "num_prompts": 4, "tiers": [1]})


def test_tokenizer_size_counts_added_tokens_and_ids_stop_below_the_first_special(
    tmp_path: Path,
) -> None:
    folder = model_folder(tmp_path / "m", config_vocab=None)
    for path in (folder, folder / "tokenizer.json"):
        found = read_tokenizer(path)
        assert found is not None and found.size == 961
        assert found.added == {958, 959, 960} and found.id_bound() == 958


@pytest.mark.parametrize(
    ("size", "added", "bound"),
    [
        (32000, {0, 1, 2}, 32000),  # Llama 2: specials below the floor
        (128256, set(range(128000, 128256)), 128000),  # Llama 3: a block at the top
        (151665, set(range(151643, 151665)), 151643),  # Qwen 2
        (256000, {106, 107, *range(255990, 256000)}, 255990),  # Gemma: specials at both ends
        (150, {149}, 149),  # too small for the 100 floor: ids from 0
    ],
)
def test_id_bound_is_the_end_of_the_longest_run_of_ordinary_ids(
    size: int, added: set[int], bound: int
) -> None:
    assert Vocab(size, frozenset(added)).id_bound() == bound


def test_unigram_and_slow_tokenizer_folders(tmp_path: Path) -> None:
    uni = tmp_path / "uni.json"
    uni.write_text(json.dumps(tokenizer_json(500, [500], unigram=True)))
    assert read_tokenizer(uni) == Vocab(501, frozenset({500}), str(uni))
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "vocab.json").write_text(json.dumps({f"t{i}": i for i in range(300)}))
    decoder = {"300": {"content": "<|endoftext|>", "special": True}}
    (slow / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": decoder}))
    found = read_tokenizer(slow)
    assert found is not None and found.size == 301 and found.id_bound() == 300


def test_model_folder_config_json_alone_or_capping_the_tokenizer(tmp_path: Path) -> None:
    only_config = tmp_path / "c"
    only_config.mkdir()
    (only_config / "config.json").write_text(json.dumps({"text_config": {"vocab_size": 777}}))
    assert read_model_folder(only_config) == Vocab(777, source=str(only_config / "config.json"))
    padded = read_model_folder(model_folder(tmp_path / "p", config_vocab=1024))
    assert padded is not None and padded.size == 961 and padded.id_bound() == 958
    assert read_model_folder(tmp_path) is None


def test_resolution_order_tokenizer_then_model_folder(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "m")
    other = tmp_path / "other.json"
    other.write_text(json.dumps(tokenizer_json(400, [400])))
    found, _ = find_vocab(other, str(folder), UNREACHABLE)
    assert found is not None and found.id_bound() == 400
    found, _ = find_vocab(None, str(folder), UNREACHABLE)
    assert found is not None and found.id_bound() == 958
    with pytest.raises(SetupError, match=r"tokenizer .*missing"):
        find_vocab(tmp_path / "missing", str(folder), UNREACHABLE)


def test_the_server_lists_the_folder_it_loaded(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "m")
    with vllm_like_server("--root", str(folder)) as url:
        found, looked = find_vocab(None, "tiny", url)
    assert found is not None and found.id_bound() == 958
    assert looked == [
        "model folder 'tiny' (not a local folder)",
        f"GET {url}/v1/models root {str(folder)!r}",
    ]
    with vllm_like_server("--n-vocab", "961") as url:  # llama.cpp's meta.n_vocab
        found, _ = find_vocab(None, "tiny", url)
    assert found is not None and found.size == 961


def test_hugging_face_cache_snapshot_counts_as_a_local_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    model_folder(tmp_path / "models--org--tiny" / "snapshots" / "abc123")
    found, _ = find_vocab(None, "org/tiny", None)
    assert found is not None and found.id_bound() == 958


def test_with_vocab_fills_only_an_unset_bound_of_token_id_prompts(tmp_path: Path) -> None:
    folder = str(model_folder(tmp_path / "m"))
    http = Endpoint(model=folder, base_url=UNREACHABLE)
    assert with_vocab(workload(), http).dataset.vocab_size == 958  # type: ignore[union-attr]
    explicit = workload(vocab_size=500)
    assert with_vocab(explicit, http) is explicit
    chat = workload().model_copy(update={"endpoint": "chat"})
    assert with_vocab(chat, http) is chat  # words, not ids: nothing to look up
    virtual = Endpoint(model=folder, virtual=object())  # type: ignore[arg-type]
    assert with_vocab(workload(), virtual).dataset.vocab_size is None  # type: ignore[union-attr]


def test_a_relative_tokenizer_is_read_from_the_space_folder(tmp_path: Path) -> None:
    model_folder(tmp_path / "tok")
    spec = workload().model_copy(update={"tokenizer": Path("tok")})
    found = with_vocab(spec, Endpoint(model="x", base_url=UNREACHABLE), base_dir=tmp_path)
    assert found.dataset.vocab_size == 958  # type: ignore[union-attr]


def test_nothing_found_falls_back_to_the_default_and_warns_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vocab, "_warned", set())
    endpoint = Endpoint(model="nowhere", base_url=UNREACHABLE)
    with caplog.at_level(logging.WARNING, logger="objectives.vocab"):
        for _ in range(3):
            assert with_vocab(workload(), endpoint).dataset.vocab_size == 32000  # type: ignore[union-attr]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "no vocabulary found for model 'nowhere'" in warning
    assert f"GET {UNREACHABLE}/v1/models (no answer)" in warning and "--vocab-size" in warning


def test_datasets_keep_the_old_default_and_floor() -> None:
    assert (
        WorkloadSpec.model_validate(
            {
                "dataset": {"kind": "random", "input_len": 8, "output_len": 1},
                "num_prompts": 1,
                "tiers": [1],
            }
        ).dataset.vocab_size
        is None
    )  # type: ignore[union-attr]
    unset = build_requests(workload(input_len=2000))
    assert all(100 <= t < 32000 for r in unset for t in r.prompt)  # type: ignore[union-attr]
    assert build_requests(workload(vocab_size=32000)) == build_requests(workload())
    tiny = build_requests(workload(input_len=2000, vocab_size=150))
    ids = [t for r in tiny for t in r.prompt]  # type: ignore[union-attr]
    assert min(ids) < 100 and max(ids) < 150
