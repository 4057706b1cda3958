"""The search-space file: what to tune, on what, with which workload and SLOs.

Validated by pydantic with ``extra="forbid"``; cross-field rules live in model validators so a
bad file is refused before anything starts. ``tuner.space.load`` turns validation errors into
one line naming the file, the YAML path, the rule and the bad value.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from objectives.metrics import SLO
from objectives.workload import WorkloadSpec
from tuner.space.knobs import ignored_env, knob_form, parse_version
from tuner.space.lossy import lossy_parameters
from tuner.space.params import Parameter, Scalar, check_env_name
from tuner.space.quality import QualitySpec
from tuner.space.rules import Rule, RuleSyntaxError, parse_rule

ArgValue = Scalar | list[Any] | dict[str, Any] | None

DEFAULT_COMMANDS: dict[str, list[str]] = {
    "vllm": ["vllm", "serve", "{model}"],
    "vllm-ascend": ["vllm", "serve", "{model}"],
    "llama.cpp": ["llama-server", "--model", "{model}"],
}


class EngineSpec(BaseModel):
    """The engine and the model it serves; the version decides how knobs are written."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["vllm", "vllm-ascend", "llama.cpp"] = Field(description="Engine family.")
    version: str = Field(description="Pinned engine version, e.g. '0.17.1'.")
    model: str = Field(description="Model path or name the engine loads.")
    served_model_name: str | None = Field(
        None, description="Name clients put in requests; defaults to the model."
    )
    command: list[str] | None = Field(
        None,
        description="Program and leading words; '{model}' is replaced. Defaults per engine, "
        "e.g. ['vllm', 'serve', '{model}'].",
    )
    image: str | None = Field(None, description="Container image, for docker targets and exports.")
    port: int = Field(8000, ge=1, le=65535, description="Port the engine listens on.")
    host: str = Field("127.0.0.1", description="Address the engine binds in a trial.")
    serve_host: str = Field(
        "0.0.0.0",
        min_length=1,
        description="Address the exported commands (commands.md, recipe.yaml, report.html) "
        "bind: a deployed server takes requests from other machines, while a trial's engine "
        "binds 'host' and only the local benchmark client reaches it.",
    )
    pass_env: list[str] = Field(
        default_factory=list,
        description="Env vars copied from tune's own environment into the engine's (e.g. "
        "HF_TOKEN); their values are secrets and are never written out.",
    )

    @field_validator("pass_env")
    @classmethod
    def _env_names(cls, names: list[str]) -> list[str]:
        return [check_env_name(n) for n in names]

    @model_validator(mode="after")
    def _version_parses(self) -> Self:
        parse_version(self.version)
        return self

    @property
    def parsed_version(self) -> tuple[int, ...]:
        return parse_version(self.version)

    def argv_prefix(self, image: bool = False) -> list[str]:
        """Program and leading words; ``image``: the engine's usual ones, as its image has
        them, whatever local ``command`` the space gives."""
        words = (None if image else self.command) or DEFAULT_COMMANDS[self.name]
        return [w.replace("{model}", self.model) for w in words]

    @property
    def request_model(self) -> str:
        return self.served_model_name or self.model


class TargetSpec(BaseModel):
    """Where engines run: the launcher ``kind`` plus that kind's own settings."""

    model_config = ConfigDict(extra="allow")

    kind: str = Field(description="Launcher kind: sim, process, docker or endpoint.")
    api_key_env: str | None = Field(
        None,
        description="Env var whose value (read at run time, never written out) clients send "
        "as 'Authorization: Bearer' to a server that wants an API key; without it, the "
        "engine's own --api-key from base.args is sent.",
    )

    def settings(self) -> dict[str, Any]:
        """The launcher kind's own settings (everything but ``kind`` and ``api_key_env``)."""
        return dict(self.model_extra or {})


class BaseSpec(BaseModel):
    """Flags and env every trial shares (not tuned)."""

    model_config = ConfigDict(extra="forbid")

    args: dict[str, ArgValue] = Field(
        default_factory=dict,
        description="Engine flags by name (leading dashes optional); true -> '--flag', false "
        "-> '--no-flag', a mapping -> JSON.",
    )
    env: dict[str, Scalar] = Field(default_factory=dict, description="Env vars for the engine.")

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, Scalar]) -> dict[str, Scalar]:
        for name in env:
            check_env_name(name)
        return env


class StudySpec(BaseModel):
    """Defaults for the study that runs this space (CLI flags override them)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(
        None,
        description="Study name; defaults to the space file's stem (with -sim appended when a "
        "space aimed at other hardware is rehearsed with --launcher sim).",
    )
    objective: str | None = Field(None, description="Default objective, e.g. p99_tpot.")
    trials: int = Field(40, ge=1, description="Default number of trials per run.")
    seed: int = Field(0, description="Sampler seed.")
    ready_timeout_s: float = Field(
        1800.0, gt=0, description="Seconds an engine may take to be ready."
    )
    throughput_floor: float = Field(
        0.8,
        ge=0,
        le=1,
        description="A tier's pick must reach this fraction of the best output throughput a "
        "config feasible at that tier reached (0 turns the floor off): a latency gain is not "
        "worth giving up more of a replica's capacity.",
    )
    race: bool = Field(
        True,
        description="Stop a tier early once the launch is out of contention there: slower "
        "than the tier's current pick, request for request, by more than race_margin with "
        "confidence 1 - race_alpha (objectives.race), or once it missed an SLO on a longest "
        "figure (max_itl_ms). A tier stopped so is never a pick; the baseline and "
        "confirmations are always measured in full. False measures every tier of every "
        "launch in full.",
    )
    race_alpha: float = Field(
        0.01, gt=0, lt=0.5, description="The paired test's one-sided significance level."
    )
    race_margin: float = Field(
        0.03,
        ge=0,
        le=1,
        description="How much slower than the tier's pick, as a fraction, puts a launch out "
        "of contention (the 3% within which two configs count as equally good).",
    )


class Space(BaseModel):
    """A whole search-space file."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field("", description="What this space tunes, for reports.")
    hardware: str = Field("", description="Hardware the space targets, e.g. '4x H200 141GB'.")
    hardware_id: str | None = Field(
        None,
        pattern=r"^[a-z0-9_]+$",
        description="The recipes' short id of the hardware (e.g. 'h200', 'gb300', '910c') "
        "that recipe.yaml names; unset, it is read from 'hardware' when that names a known one.",
    )
    engine: EngineSpec = Field(description="Engine, version and model.")
    target: TargetSpec = Field(description="Launcher kind and its settings.")
    base: BaseSpec = Field(default_factory=BaseSpec, description="Shared flags and env.")
    parameters: dict[str, Parameter] = Field(
        default_factory=dict, description="Tuned parameters by name."
    )
    rules: list[str] = Field(
        default_factory=list,
        description="Comparisons between parameters that every trial must satisfy, e.g. "
        "'long_prefill_token_threshold <= max_num_batched_tokens'.",
    )
    workload: WorkloadSpec = Field(description="Requests sent at each concurrency tier.")
    slos: list[SLO] = Field(default_factory=list, description="Service-level objectives.")
    study: StudySpec = Field(default_factory=StudySpec, description="Study defaults.")
    quality: QualitySpec = Field(
        default_factory=QualitySpec,
        description="How far a config's answers may differ from the baseline's before it "
        "cannot be a pick.",
    )
    sim: dict[str, Any] | None = Field(
        None,
        description="Settings of the simulated engine (e.g. profile: h200x4) used when "
        "'--launcher sim' replaces the target, so a space for real hardware runs without it.",
    )

    @model_validator(mode="after")
    def _rules_name_parameters(self) -> Self:
        for i, rule in enumerate(self.parsed_rules()):
            unknown = sorted(rule.names - set(self.parameters))
            if unknown:
                raise ValueError(
                    f"rules[{i}] {rule.text!r} names unknown parameter {unknown[0]!r}; "
                    f"parameters are: {', '.join(sorted(self.parameters)) or 'none'}"
                )
        return self

    @model_validator(mode="after")
    def _one_parameter_per_binding(self) -> Self:
        # Two parameters on one flag: the launch takes the second's value while the trial
        # records the first's, so every measurement would be filed under the wrong config.
        owner: dict[str, str] = {}
        for name, p in self.parameters.items():
            target, whole = _bound_to(p)
            # A flag's whole value and a key inside it cannot both be set in one launch.
            clash = f"{whole} as JSON" if p.flag is not None else whole
            other = owner.setdefault(target, name)
            if other == name and clash in owner:
                other = owner[clash]
            if other != name:
                raise ValueError(
                    f"parameters.{name}: binds {target}, as parameters.{other} does; "
                    "each flag, env var, JSON key or knob takes one parameter"
                )
            if p.json_key is not None:
                owner.setdefault(f"{whole} as JSON", name)
        return self

    @model_validator(mode="after")
    def _knobs_fit_version(self) -> Self:
        version = self.engine.parsed_version
        for name, p in self.parameters.items():
            if p.knob is not None:
                _check_knob(self.engine.name, name, p, version)
            if p.env is not None and (why := ignored_env(self.engine.name, p.env, version)):
                raise ValueError(f"parameters.{name}: {why}")
        for key in self.base.env:
            if why := ignored_env(self.engine.name, key, version):
                raise ValueError(f"base.env.{key}: {why}")
        return self

    @model_validator(mode="after")
    def _partial_prefills_are_one(self) -> Self:
        # vLLM V1 refuses any other value at start-up: sampling it would waste every trial.
        flag = "--max-num-partial-prefills"
        for name, p in self.parameters.items():
            values: list[object] = [*p.choices] if p.choices else [p.low, p.high]
            if p.flag == flag and any(v != 1 for v in values):
                raise ValueError(f"parameters.{name}: vLLM V1 only accepts {flag} 1")
        value = self.base.args.get(flag.lstrip("-"), self.base.args.get(flag, 1))
        if value != 1:
            raise ValueError(f"base.args: vLLM V1 only accepts {flag} 1 (got {value!r})")
        return self

    @model_validator(mode="after")
    def _baseline_obeys_rules(self) -> Self:
        defaults = self.defaults()
        for rule in self.parsed_rules():
            if not rule.holds(defaults):
                raise ValueError(
                    f"the baseline (every parameter's default) breaks rule {rule.text!r}"
                )
        return self

    def parsed_rules(self) -> list[Rule]:
        parsed = []
        for i, text in enumerate(self.rules):
            try:
                parsed.append(parse_rule(text))
            except RuleSyntaxError as err:
                raise ValueError(f"rules[{i}] {text!r}: {err}") from None
        return parsed

    def quality_gated(self) -> bool:
        """Whether the quality floor keeps configs from being picks (see ``QualitySpec``)."""
        if self.quality.gate is not None:
            return self.quality.gate
        return bool(lossy_parameters(self.parameters))

    def defaults(self) -> dict[str, Scalar]:
        return {name: p.default for name, p in self.parameters.items()}


def _bound_to(p: Parameter) -> tuple[str, str]:
    """What a parameter sets, spelled so that two spellings of one flag are one target, and
    the whole it belongs to (a JSON key's flag; else the target itself)."""
    if p.json_key is not None:
        flag = f"flag {_flag_name(p.json_key.flag)}"
        return f"{flag} key {p.json_key.key!r}", flag
    if p.flag is not None:
        target = f"flag {_flag_name(p.flag)}"
    else:
        target = f"env var {p.env}" if p.env is not None else f"knob {p.knob}"
    return target, target


def _flag_name(flag: str) -> str:
    # --max-num-seqs, --max_num_seqs and max-num-seqs are one flag to the engine.
    return "--" + flag.lstrip("-").replace("_", "-")


def _check_knob(engine: str, name: str, p: Parameter, version: tuple[int, ...]) -> None:
    assert p.knob is not None
    try:
        form = knob_form(engine, p.knob, version)
    except KeyError as err:
        raise ValueError(f"parameters.{name}: {err.args[0]}") from None
    if form.values is None:
        return
    bad = [c for c in (p.choices or []) if str(c) not in form.values]
    if bad:
        ver = ".".join(map(str, version))
        raise ValueError(
            f"parameters.{name}: {engine} {ver} cannot express {p.knob} value(s) "
            f"{', '.join(map(str, bad))}; it accepts {', '.join(sorted(form.values))}"
        )
