"""The space's ``quality:`` section: how far a config may answer otherwise than the baseline.

Every launch answers the fixed probe set (``objectives.probes``); its agreement with the
baseline's answers (``objectives.agreement``) is recorded for every trial. Where the gate is on
(by default whenever the space tunes a lossy knob, ``tuner.space.lossy``), a config below
``min_agreement`` is lower quality: recorded with its figures, never a pick. With a
``command`` (the user's own evaluation, e.g. an lm-eval-harness run against the endpoint) the
floor applies to that command's score relative to the baseline's instead.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class QualityCommand(BaseModel):
    """An evaluation run against each launch's endpoint; one score read from its output."""

    model_config = ConfigDict(extra="forbid")

    argv: list[str] = Field(
        min_length=1,
        description="Program and arguments; '{url}' becomes the endpoint's base URL "
        "(http://HOST:PORT) and '{model}' the model name requests use (also in the env as "
        "TUNE_QUALITY_URL and TUNE_QUALITY_MODEL). Run from the space file's folder.",
    )
    score: str | None = Field(
        None,
        description="Regular expression whose first group is the score in the command's "
        "output (stdout then stderr); unset: the last number it printed.",
    )
    higher_is_better: bool = Field(
        True, description="Whether a larger score is better (false for an error rate)."
    )
    timeout_s: float = Field(
        3600.0, gt=0, description="Seconds the command may run; past them the trial fails."
    )

    @field_validator("score")
    @classmethod
    def _one_group(cls, pattern: str | None) -> str | None:
        if pattern is None:
            return None
        try:
            groups = re.compile(pattern).groups
        except re.error as err:
            raise ValueError(f"score {pattern!r} is not a regular expression: {err}") from None
        if groups < 1:
            raise ValueError(f"score {pattern!r} needs a group, e.g. 'acc: ([0-9.]+)'")
        return pattern


class QualitySpec(BaseModel):
    """Whether and how configs must answer as the baseline does."""

    model_config = ConfigDict(extra="forbid")

    gate: bool | None = Field(
        None,
        description="Keep configs below min_agreement from being picks; unset: on when the "
        "space tunes a lossy knob (KV cache dtype, quantization, kernels, speculation).",
    )
    min_agreement: float = Field(
        0.95,
        ge=0,
        le=1,
        description="The floor: the share of the baseline's answer tokens a config must "
        "reproduce (measure: tokens), the share of probes answered identically (measure: "
        "exact), or with a command, its score as a fraction of the baseline's.",
    )
    measure: Literal["tokens", "exact"] = Field(
        "tokens",
        description="Which probe agreement the floor reads: the token agreement rate, or the "
        "share of probes answered token for token like the baseline.",
    )
    probes: int = Field(8, ge=1, le=64, description="Probe prompts every launch answers.")
    max_tokens: int = Field(16, ge=1, le=512, description="Tokens of each probe's answer.")
    command: QualityCommand | None = Field(
        None, description="The user's own evaluation, whose score the floor reads instead."
    )
