"""``endpoint``: a server somebody else runs, benchmarked as it is.

Nothing is started, restarted or stopped, so a space whose target is an endpoint may not
sample engine parameters: ``accepts_engine_params = False`` tells the space validator to refuse
them with a clear message. Readiness is the same as for launched engines (health answers 200
and one real completion succeeds), so a server that is down fails the trial as an ``InfraError`` in
``wait_ready`` instead of failing every request of the benchmark.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator

from launchers import register
from launchers._base import Endpoint, Launcher, LauncherSettings
from launchers._startup import wait_until_ready
from tuner.engine import EngineConfig
from tuner.errors import InfraError, LaunchError


class EndpointSettings(LauncherSettings):
    """``target:`` settings of an already running OpenAI-compatible server."""

    url: str = Field(description="Base URL of the server, e.g. http://127.0.0.1:8000.")
    model: str | None = Field(
        None, description="Model name to request (default: the space's model)."
    )
    health_path: str = Field("/health", description="Path that answers 200 while the server is up.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {url!r}")
        return url.rstrip("/")


@register
class EndpointLauncher(Launcher):
    """Benchmarks a running server; owns nothing, so ``stop()`` leaves it running."""

    kind: ClassVar[str] = "endpoint"
    settings_model: ClassVar[type[LauncherSettings]] = EndpointSettings
    accepts_engine_params: ClassVar[bool] = False
    settings: EndpointSettings

    def __init__(self, settings: LauncherSettings) -> None:
        super().__init__(settings)
        self._model: str | None = None
        self._api_key: str | None = None
        self._log_path: Path | None = None

    def start(self, config: EngineConfig, trial_dir: Path) -> None:
        self._model = self.settings.model or config.model
        self._api_key = config.client_api_key
        trial_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = trial_dir / "engine.log"
        note = f"external endpoint {self.settings.url} (model {self._model}); its log is not ours\n"
        self._log_path.write_text(note, encoding="utf-8")

    def wait_ready(self, timeout_s: float) -> Endpoint:
        if self._model is None:
            raise RuntimeError("wait_ready() before start()")
        try:
            wait_until_ready(
                self.settings.url,
                self._model,
                timeout_s,
                health_path=self.settings.health_path,
                api_key=self._api_key,
            )
        except LaunchError as err:
            # The server is not ours to configure: its absence is never the sampled config's.
            raise InfraError(str(err)) from None
        return Endpoint(model=self._model, base_url=self.settings.url, api_key=self._api_key)

    def logs(self) -> str:
        return ""

    def stop(self) -> None:
        self._model = None
