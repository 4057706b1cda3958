"""Runs one launch the way a study does, for tests that interrupt it from outside.

    python drive_launcher.py KIND SETTINGS_JSON CONFIG_JSON TRIAL_DIR PHASE

PHASE ``startup`` prints ``STARTED`` and waits for readiness (the engine is told to hang);
PHASE ``bench`` prints ``READY`` once ready, then sends completions until interrupted. The test
then sends SIGINT or SIGTERM and checks that nothing the launch started is left.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx

from launchers import launcher_class
from tuner.engine import EngineConfig


def main() -> None:
    kind, settings_json, config_json, trial_dir, phase = sys.argv[1:6]
    cls = launcher_class(kind)
    raw = json.loads(config_json)
    for key in ("command", "args", "devices"):
        raw[key] = tuple(raw.get(key, ()))
    raw["secret_env"] = frozenset(raw.get("secret_env", ()))
    raw["tuned_env"] = frozenset(raw.get("tuned_env", ()))
    config = EngineConfig(**raw)
    with cls(cls.settings_model.model_validate_json(settings_json)) as launcher:
        launcher.start(config, Path(trial_dir))
        print("STARTED", flush=True)
        endpoint = launcher.wait_ready(600)
        print("READY", flush=True)
        if phase == "bench":
            with httpx.Client(base_url=str(endpoint.base_url), timeout=30) as client:
                while True:
                    body = {"model": endpoint.model, "prompt": "hi", "max_tokens": 16}
                    client.post("/v1/completions", json=body).raise_for_status()


if __name__ == "__main__":
    main()
