"""One tunable parameter of a space and how its value reaches the engine."""

from __future__ import annotations

import math
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tuner.secret_policy import ENV_NAME, ENV_NAME_RULE

Scalar = str | int | float | bool


class JsonBinding(BaseModel):
    """A key inside a JSON-valued flag (``--speculative-config``'s ``num_speculative_tokens``)."""

    model_config = ConfigDict(extra="forbid")

    flag: str = Field(description="The JSON-valued engine flag, e.g. --speculative-config.")
    key: str = Field(description="The key this parameter sets inside that flag's JSON object.")


class Parameter(BaseModel):
    """A dimension of the space, bound to exactly one engine flag, env var, JSON key or knob."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["categorical", "int", "float"] = Field(description="How values are sampled.")
    description: str = Field("", description="What the parameter does, for people and reports.")
    choices: list[Scalar] | None = Field(None, description="Values of a categorical parameter.")
    low: float | None = Field(None, description="Lowest value of an int or float parameter.")
    high: float | None = Field(None, description="Highest value of an int or float parameter.")
    step: float | None = Field(None, description="Grid step of an int or float parameter.")
    log: bool = Field(False, description="Sample on a log scale (int/float; low must be > 0).")
    default: Scalar = Field(
        description="The engine's own default (what it does when the knob is not set): the "
        "value the baseline trial uses."
    )
    unset: Scalar | None = Field(
        None,
        description="The value meaning 'not set': nothing is rendered for it, and a JSON flag "
        "with any member unset is left out entirely.",
    )
    ordered: bool = Field(
        True,
        description="Whether numeric choices are in the knob's own order, so a sampler may "
        "expect a value's effect between its neighbours'. False where a value stands outside "
        "that order, as -1 meaning 'auto' among slot counts.",
    )
    flag: str | None = Field(
        None, description="Engine flag that takes the value, e.g. --max-num-seqs."
    )
    env: str | None = Field(
        None, description="Env var that takes the value, e.g. VLLM_USE_DEEP_GEMM."
    )
    json_key: JsonBinding | None = Field(
        None, alias="json", description="A key inside a JSON-valued flag."
    )
    knob: str | None = Field(
        None,
        description="A versioned knob (attention_backend, moe_backend, fast_loading) rendered to "
        "the form the pinned engine version reads.",
    )
    render: dict[str, list[str]] | None = Field(
        None,
        description="For a flag parameter: the exact argv words per value, e.g. "
        "{enabled: [--async-scheduling], disabled: [--no-async-scheduling]}.",
    )

    @field_validator("env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        return None if value is None else check_env_name(value)

    @field_validator("render", mode="before")
    @classmethod
    def _render_keys_as_text(cls, value: object) -> object:
        # YAML reads on/off/yes/no keys as booleans; values are looked up by their text form.
        if isinstance(value, dict):
            return {
                (str(k).lower() if isinstance(k, bool) else str(k)): v for k, v in value.items()
            }
        return value

    @model_validator(mode="after")
    def _one_binding(self) -> Self:
        bound = [n for n in ("flag", "env", "json", "knob") if self._binding(n) is not None]
        if len(bound) != 1:
            raise ValueError(
                f"needs exactly one of flag, env, json, knob (got {', '.join(bound) or 'none'})"
            )
        if self.render is not None and self.flag is None:
            raise ValueError("'render' is only for flag parameters")
        return self

    @model_validator(mode="after")
    def _domain(self) -> Self:
        if self.type == "categorical":
            self._check_categorical()
        else:
            self._check_numeric()
        for name in ("default", "unset"):
            value = getattr(self, name)
            if value is not None and not self.contains(value):
                raise ValueError(f"{name} {value!r} is outside the parameter's values")
        return self

    def _binding(self, name: str) -> object:
        return self.json_key if name == "json" else getattr(self, name)

    def _check_categorical(self) -> None:
        if not self.choices:
            raise ValueError("a categorical parameter needs a non-empty 'choices' list")
        if self.low is not None or self.high is not None or self.step is not None:
            raise ValueError("a categorical parameter takes 'choices', not low/high/step")
        if len(set(map(repr, self.choices))) != len(self.choices):
            raise ValueError(f"choices repeat a value: {self.choices}")

    def _check_numeric(self) -> None:
        if self.choices is not None:
            raise ValueError(f"an {self.type} parameter takes low/high, not 'choices'")
        if self.low is None or self.high is None:
            raise ValueError(f"an {self.type} parameter needs 'low' and 'high'")
        if self.low > self.high:
            raise ValueError(f"low ({_num(self.low)}) is above high ({_num(self.high)})")
        if self.log and self.low <= 0:
            raise ValueError(f"a log-scale parameter needs low > 0 (got {_num(self.low)})")
        if self.log and self.step is not None:
            raise ValueError("'log' and 'step' cannot be combined")
        if self.step is not None and self.step <= 0:
            raise ValueError(f"step must be > 0 (got {_num(self.step)})")
        if self.type == "int":
            for name in ("low", "high", "step"):
                value = getattr(self, name)
                if value is not None and not float(value).is_integer():
                    raise ValueError(f"{name} of an int parameter must be whole (got {value})")

    def contains(self, value: Scalar) -> bool:
        """Whether ``value`` is one this parameter can take."""
        if self.type == "categorical":
            return any(same_value(value, c) for c in self.choices or [])
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.type == "int" and not float(value).is_integer():
            return False
        assert self.low is not None and self.high is not None
        return self.low <= value <= self.high

    def is_unset(self, value: Scalar) -> bool:
        return self.unset is not None and same_value(value, self.unset)


def _key_text(key: object) -> str:
    return str(key).lower() if isinstance(key, bool) else str(key)


def same_value(a: Scalar, b: Scalar) -> bool:
    # YAML gives 1 and "1" and True as different things; a choice matches only its own type,
    # except that ints and floats compare by value.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b)
    return type(a) is type(b) and a == b


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def check_env_name(name: str) -> str:
    """``name`` if it is a plain env var name (a shell would run anything else)."""
    if not ENV_NAME.match(name):
        raise ValueError(f"{ENV_NAME_RULE} (got {name!r})")
    return name
