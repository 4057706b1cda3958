"""The engine config the objectives tests serve on the simulated engine."""

from __future__ import annotations

from tuner.engine import EngineConfig

MODEL = "MiniMaxAI/MiniMax-M2.5"


def sim_config(*args: str) -> EngineConfig:
    """MiniMax-M2.5 on the simulated 4x H200 (TP4, expert parallel), plus ``args``."""
    return EngineConfig(
        command=("vllm", "serve", MODEL),
        args=("-tp", "4", "--enable-expert-parallel", *args),
        env={},
        model=MODEL,
        port=8000,
        labels={"trial": "0"},
    )
