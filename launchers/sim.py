"""The ``sim`` launcher: a simulated vLLM engine inside the tuner's process.

``start()`` builds a ``SimEngine`` from the config's ``vllm serve`` flags and env (``--port`` /
``--host`` are irrelevant in virtual time) and writes vLLM-like start-up lines to
``trial_dir/engine.log``; refusals vLLM makes at start-up raise ``LaunchError`` with the
refusal's kind and log line. ``wait_ready()`` returns an ``Endpoint`` whose ``virtual`` engine
runs workloads in virtual time. Each launch draws its noise from ``seed`` and the trial label,
so re-measuring one config on a fresh engine gives a different but reproducible draw.
``startup()`` reports the start-up the hardware would take (weights, then compile, or the
graphs read back from the compile cache kept beside the trial folders), in virtual seconds.

``python -m launchers.sim`` serves the same engine over HTTP (see ``launchers.simengine.server``).
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import yaml
from pydantic import Field, ValidationError, field_validator

from launchers import register
from launchers._base import Endpoint, Launcher, LauncherSettings, Startup
from launchers.simengine import EngineRefused, SimEngine, load_profile, profile_names
from launchers.simengine.config import resolve
from launchers.simengine.profile import Profile
from launchers.simengine.startup import weights_load_s
from objectives.records import BenchRequest, RequestRecord
from tuner.engine import EngineConfig
from tuner.errors import InfraError, LaunchError


class SimSettings(LauncherSettings):
    """``target:`` settings of a space whose engine is simulated."""

    profile: str = Field("h200x4", description="Hardware profile: h200x4, 910c or cpu")
    profile_file: Path | None = Field(
        None,
        description="A profile YAML of one's own in place of the named one (every field of a "
        "shipped profile, e.g. a copy of h200x4 with other kernel efficiencies: a neighbouring "
        "model, another engine release); absolute, or relative to the working directory",
    )
    seed: int = Field(0, description="Base seed of run-to-run noise (mixed with the trial label)")
    startup_s: float | None = Field(
        None,
        ge=0,
        description="Start-up seconds a launch reports (virtual; nothing waits); null: the "
        "profile's weight loading and compile, less when the compile cache holds the graphs",
    )
    compile_cache: bool = Field(
        True,
        description="Keep the simulated compile cache beside the trial folders, for the "
        "study's later launches (false: every launch compiles from cold)",
    )
    wall_startup_s: float = Field(
        0.0,
        ge=0,
        description="Wall-clock seconds wait_ready sleeps, to stand in for a real start-up "
        "(parallel-slot benchmarks, killing a worker mid-trial); 0 keeps launches instant",
    )
    wall_time_scale: float = Field(
        0.0,
        ge=0,
        description="Each tier also sleeps its virtual duration times this factor in wall "
        "time (0.01: a 100 s benchmark takes 1 s); 0 keeps tiers instant",
    )

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, name: str) -> str:
        # Refused with the space, not as an infrastructure failure of every trial.
        valid = profile_names()
        if name not in valid:
            raise ValueError(f"unknown sim profile {name!r}; valid profiles: {', '.join(valid)}")
        return name

    @field_validator("profile_file")
    @classmethod
    def _readable_profile(cls, path: Path | None) -> Path | None:
        if path is not None:
            read_profile(path)  # a bad file is refused with the space, not once per trial
        return path


def read_profile(path: Path) -> Profile:
    """The profile a YAML file holds, named after the file (``ValueError`` when it is none)."""
    try:
        return Profile(name=path.stem, **yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, TypeError, ValidationError) as err:
        first = str(err).splitlines()[0]
        raise ValueError(f"sim profile_file {path}: not a profile ({first})") from None


def launch_seed(seed: int, trial: str) -> int:
    """A stable per-launch seed from the space's seed and the trial label."""
    digest = hashlib.sha256(f"{seed}:{trial}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


@register
class SimLauncher(Launcher):
    """Runs a ``SimEngine``; see the module docstring."""

    kind = "sim"
    settings_model = SimSettings

    def __init__(self, settings: LauncherSettings) -> None:
        super().__init__(settings)
        self._engine: SimEngine | None = None
        self._error: LaunchError | None = None
        self._model = ""
        self._log: IO[str] | None = None
        self._lines: list[str] = []
        self._startup_s = 0.0

    @property
    def _settings(self) -> SimSettings:
        assert isinstance(self.settings, SimSettings)
        return self.settings

    def start(self, config: EngineConfig, trial_dir: Path) -> None:
        self.stop()
        s = self._settings
        trial_dir.mkdir(parents=True, exist_ok=True)
        self._log = (trial_dir / "engine.log").open("w", encoding="utf-8")
        self._lines = []
        self._model = config.model
        seed = launch_seed(s.seed, config.labels.get("trial", "0"))
        shown = s.profile_file or s.profile
        self._write(f"launch: {config.shell_command()} (sim profile {shown}, seed {seed})")
        self._startup_s = 0.0  # a refusal of its flags comes before anything loads
        try:
            self._engine = self._build(config, seed, trial_dir)
        except EngineRefused as err:
            self._write(f"ERROR {err}")
            self._error = LaunchError(str(err), err.kind, "\n".join(self._lines[-20:]))
            raise self._error from err
        except ValueError as err:  # an unknown profile name, a profile file gone bad
            raise InfraError(str(err)) from err
        engine_s = self._engine.startup_s
        self._startup_s = engine_s if s.startup_s is None else s.startup_s
        self._write(f"Application startup complete. (start-up {self._startup_s:.1f} s)")

    def _build(self, config: EngineConfig, seed: int, trial_dir: Path) -> SimEngine:
        s = self._settings
        profile = read_profile(s.profile_file) if s.profile_file else load_profile(s.profile)
        # The release the space pins: announced, and its flags are the ones parsed.
        cfg = resolve(config.args, config.env, profile, config.engine_version or None)
        # A memory refusal comes once the weights are loaded, as vLLM sizes its KV cache then.
        self._startup_s = weights_load_s(profile, cfg)
        # Beside the trial folders: one cache per study, shared by its slots, kept on resume.
        cache = trial_dir.parent / ".engine-cache" if s.compile_cache else None
        return SimEngine(profile, cfg, seed, log=self._write, cache_dir=cache)

    def startup(self, wall_s: float) -> Startup:
        """The simulated engine's own start-up (virtual seconds), not the wall clock's."""
        measured = super().startup(wall_s)
        return Startup(self._startup_s, measured.compile_key, measured.compile_cached)

    def wait_ready(self, timeout_s: float) -> Endpoint:
        if self._error is not None:
            raise self._error
        if self._engine is None:
            raise InfraError("sim engine was not started")
        s = self._settings
        if s.wall_startup_s:
            time.sleep(min(s.wall_startup_s, timeout_s))
        virtual = _WallClock(self._engine, s.wall_time_scale) if s.wall_time_scale else self._engine
        return Endpoint(model=self._model, virtual=virtual)

    def logs(self) -> str:
        return "\n".join(self._lines)

    def stop(self) -> None:
        self._engine = None
        self._error = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def _write(self, line: str) -> None:
        self._lines.append(line)
        if self._log is not None and not self._log.closed:
            self._log.write(line + "\n")
            self._log.flush()


class _WallClock:
    """A virtual engine that also spends its (scaled) virtual duration in wall-clock time."""

    def __init__(self, engine: SimEngine, scale: float) -> None:
        self.engine, self.scale = engine, scale

    def run(
        self,
        requests: Sequence[BenchRequest],
        concurrency: int,
        request_rate: float | None = None,
        burstiness: float = 1.0,
    ) -> list[RequestRecord]:
        records = self.engine.run(requests, concurrency, request_rate, burstiness)
        ends = [r.chunk_times[-1] for r in records if r.chunk_times]
        if ends:
            time.sleep((max(ends) - min(r.send_time for r in records)) * self.scale)
        return records

    def server_counters(self) -> dict[str, float]:
        return self.engine.server_counters()

    def answer(self, prompt: Sequence[int], max_tokens: int) -> list[int]:
        return self.engine.answer(prompt, max_tokens)

    def gauge_peaks(self) -> dict[str, float]:
        return self.engine.gauge_peaks()


if __name__ == "__main__":
    from launchers.simengine.server import main

    sys.exit(main(sys.argv[1:]))
