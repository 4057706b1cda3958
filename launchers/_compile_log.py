"""Which compile-cache entry a vLLM launch used, and whether it was there already, from its log.

vLLM names the folder of its torch.compile artifacts (``.../torch_compile_cache/<hash>/...``)
and then says whether it loaded the graphs from it or compiled them. The hash is vLLM's own
key of what the compiled graphs depend on, so launches that share it are the ones a kept
cache can speed up. The simulated engine logs the same lines (``simengine.startup``).
"""

from __future__ import annotations

import re

_CACHE_DIR = re.compile(r"Using cache directory: \S*?torch_compile_cache/([0-9a-f]+)/")
_LOADED = "Directly load the compiled graph"
_COMPILED = "Compiling a graph for"


def compile_cache(log: str) -> tuple[str | None, bool | None]:
    """``(key, cached)``: the first compile key the log names (None: none named, such as an
    eager engine) and whether every graph came from the cache (None: the log does not say)."""
    match = _CACHE_DIR.search(log)
    key = match.group(1) if match else None
    if _COMPILED in log:  # a graph compiled, even beside loaded ones: the cache fell short
        return key, False
    if _LOADED in log:
        return key, True
    return key, None
