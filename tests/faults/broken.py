"""Launchers for the fault tests: the simulated engine, except where a start meets a fault."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from launchers._base import Endpoint, Launcher, LauncherSettings
from launchers.sim import SimLauncher
from tuner.engine import EngineConfig
from tuner.errors import DatasetError, TunerError

# What escapes a launch that is neither the config's fault nor an infrastructure fault: the
# docker image not pulled yet, a dataset file not copied yet, a bug.
ERRORS: dict[str, BaseException] = {
    "image": TunerError("docker image 'vllm:x' is not on this host; pull or load it first"),
    "dataset": DatasetError("workload.dataset.path: no such file 'sharegpt.json'"),
    "bug": RuntimeError("a bug in tune"),
}


class BrokenSettings(LauncherSettings):
    fail_trials: list[int] = Field(default_factory=list, description="Trials that meet it once.")
    error: str = Field("image", description="A key of ERRORS.")


class BrokenLauncher(Launcher):
    """The simulated engine; each of ``fail_trials`` raises ``ERRORS[error]`` on its first
    start (the fault is fixed before the rerun)."""

    kind: ClassVar[str] = "broken"
    settings_model: ClassVar[type[LauncherSettings]] = BrokenSettings
    hits: ClassVar[list[int]] = []

    def __init__(self, settings: LauncherSettings) -> None:
        super().__init__(settings)
        self.inner = SimLauncher(SimLauncher.settings_model())

    def start(self, config: EngineConfig, trial_dir: Path) -> None:
        assert isinstance(self.settings, BrokenSettings)
        number = int(config.labels["trial"])
        if number in self.settings.fail_trials and number not in BrokenLauncher.hits:
            BrokenLauncher.hits.append(number)
            raise ERRORS[self.settings.error]
        self.inner.start(config, trial_dir)

    def wait_ready(self, timeout_s: float) -> Endpoint:
        return self.inner.wait_ready(timeout_s)

    def logs(self) -> str:
        return self.inner.logs()

    def stop(self) -> None:
        self.inner.stop()
