"""The simulated vLLM engine: a step-by-step model of vLLM V1 on a named hardware profile.

``SimEngine`` serves workloads in virtual time (the ``VirtualEngine`` of objectives/endpoint.py);
``server.py`` puts the same engine behind an OpenAI-compatible HTTP server paced in real time.
Modules: ``profile`` (hardware + model data files), ``model`` (step time), ``kvcache`` (block
pool with prefix caching), ``scheduler`` (V1 scheduling rules), ``core`` (the step loop),
``config`` / ``args`` / ``memory`` (``vllm serve`` flags, env, refusals, KV pool sizing).
"""

from __future__ import annotations

from launchers.simengine.engine import SimEngine
from launchers.simengine.errors import EngineRefused
from launchers.simengine.profile import load_profile, profile_names

__all__ = ["EngineRefused", "SimEngine", "load_profile", "profile_names"]
