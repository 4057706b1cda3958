"""Reading a vLLM start-up log for its compile-cache key and whether the cache held it."""

from __future__ import annotations

from launchers._compile_log import compile_cache

# Lines as vLLM 0.11+ prints them (worker prefix and all).
USING = (
    "(EngineCore_DP0 pid=94) INFO 03-09 12:57:29 [backends.py:913] Using cache directory: "
    "/root/.cache/vllm/torch_compile_cache/3a332b42ba/rank_0_0/backbone for vLLM's torch.compile"
)
LOADED = (
    "(EngineCore_DP0 pid=94) INFO 03-09 12:57:31 [backends.py:283] Directly load the compiled "
    "graph(s) for compile range (1, 4096) from the cache, took 0.961 s"
)
COMPILED = (
    "(EngineCore_DP0 pid=94) INFO 03-09 12:57:31 [backends.py:218] Compiling a graph for "
    "compile range (1, 4096) takes 41.20 s"
)


def test_a_hit_names_its_key() -> None:
    assert compile_cache(f"boot\n{USING}\n{LOADED}\nready") == ("3a332b42ba", True)


def test_a_miss_names_its_key() -> None:
    assert compile_cache(f"{USING}\n{COMPILED}") == ("3a332b42ba", False)


def test_one_graph_compiled_beside_loaded_ones_is_a_miss() -> None:
    assert compile_cache(f"{USING}\n{LOADED}\n{COMPILED}") == ("3a332b42ba", False)


def test_an_eager_engine_or_another_one_says_nothing() -> None:
    assert compile_cache("llama server listening at http://127.0.0.1:8080") == (None, None)
