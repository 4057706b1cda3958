"""Launchers for the fault tests: the simulated engine, except where a start meets a fault."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from launchers._base import LauncherSettings
from tests.tuner.run.test_study import FlakyLauncher, FlakySettings
from tuner.errors import DatasetError, TunerError

# What escapes a launch that is neither the config's fault nor an infrastructure fault: the
# docker image not pulled yet, a dataset file not copied yet, a bug.
ERRORS: dict[str, BaseException] = {
    "image": TunerError("docker image 'vllm:x' is not on this host; pull or load it first"),
    "dataset": DatasetError("workload.dataset.path: no such file 'sharegpt.json'"),
    "bug": RuntimeError("a bug in tune"),
}


class BrokenSettings(FlakySettings):
    error: str = Field("image", description="A key of ERRORS.")


class BrokenLauncher(FlakyLauncher):
    """The simulated engine; each of ``fail_trials`` raises ``ERRORS[error]`` on its first
    start (the fault is fixed before the rerun)."""

    kind: ClassVar[str] = "broken"
    settings_model: ClassVar[type[LauncherSettings]] = BrokenSettings
    hits: ClassVar[list[int]] = []

    def fault(self) -> BaseException:
        assert isinstance(self.settings, BrokenSettings)
        return ERRORS[self.settings.error]
