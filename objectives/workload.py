"""The ``workload:`` section of a space file: what every trial sends, tier by tier.

A workload is a dataset (how prompts and output lengths are made), a number of measured
requests per concurrency tier, warm-up requests that are not measured, the tiers themselves,
and an optional open-loop request rate. Everything is derived from ``seed``, so every trial
sends the same requests in the same order. Token-id prompts must stay inside the served
model's vocabulary: a dataset's ``vocab_size`` left unset is found for the endpoint at run time
(``objectives.vocab``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from objectives.gaps import LONG_GAP_S


class _Strict(BaseModel):
    # No nan or inf: an SLO or a timeout of nan never fires, and inf crashes the timer.
    model_config = ConfigDict(extra="forbid", frozen=False, allow_inf_nan=False)


# Beyond these a workload is a typo, and building it would exhaust memory mid-trial (token ids
# are held as Python ints, about 40 bytes each, for a tier's prompts at once).
MAX_LEN = 16 * 1024 * 1024  # tokens of any one length (the longest contexts are ~10M)
MAX_TIER_TOKENS = 64 * 1024 * 1024  # prompt tokens one tier builds
MAX_SECONDS = 7 * 24 * 3600.0


class _Outputs(_Strict):
    """Output lengths from a file, for any dataset kind (``objectives.datasets.outputs``)."""

    output_lengths_file: Path | None = Field(
        None,
        description="A file of output lengths, one a line, relative to the space file's folder: "
        "each request draws its output length from them (seeded), instead of output_len.",
    )


_RATIO = (
    "Each request's output length is drawn uniformly from [len*(1-r), len*(1+r)] around the "
    "length it would have (seeded, apart from the prompts); 0 = as it is."
)


class RandomDataset(_Outputs):
    """Synthetic prompts of exact token lengths, as ``vllm bench serve --dataset-name random``."""

    kind: Literal["random"] = Field(description="Dataset kind selector.")
    input_len: int = Field(gt=0, description="Prompt length in tokens (before range_ratio).")
    output_len: int = Field(gt=0, description="Output length in tokens (before range_ratio).")
    range_ratio: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Lengths are drawn uniformly from [len*(1-r), len*(1+r)]; 0 = exact.",
    )
    prefix_len: int = Field(
        0, ge=0, description="Tokens of one prefix shared by every prompt (prefix-cache reuse)."
    )
    vocab_size: int | None = Field(
        None,
        ge=2,
        description="Token ids for /v1/completions are drawn from [100, vocab_size) (from 0 "
        "when vocab_size <= 200); unset: below the served model's first special token, found "
        "from the workload's tokenizer, the model folder or the server (objectives/vocab.py).",
    )


class ShareGPTDataset(_Outputs):
    """Real conversations: the first human turn is the prompt, the reply sets the output length.

    Accepts a JSON list or JSONL; turns as ``{"from", "value"}`` or ``{"role", "content"}``.
    A turn's optional ``token_count`` (as coding benchmark sets that embed conversation history
    carry) is used as its length; otherwise the length is estimated from characters.
    """

    kind: Literal["sharegpt"] = Field(description="Dataset kind selector.")
    path: Path = Field(description="JSON or JSONL file, relative to the space file's folder.")
    max_output_len: int | None = Field(
        None, gt=0, description="Cap on the output length taken from the reference reply."
    )
    output_len: int | None = Field(
        None, gt=0, description="Fixed output length for every request (overrides the reply)."
    )
    output_range_ratio: float = Field(0.0, ge=0.0, lt=1.0, description=_RATIO)
    min_len: int = Field(
        4, ge=1, description="Conversations whose prompt or reply is shorter are skipped."
    )
    max_prompt_len: int | None = Field(
        None, gt=0, description="Conversations with a longer prompt (tokens) are skipped."
    )
    chars_per_token: float = Field(
        4.0, gt=0, description="Estimate of characters per token when no token_count is given."
    )

    @model_validator(mode="after")
    def _caps_agree(self) -> ShareGPTDataset:
        if self.output_len and self.max_output_len and self.output_len > self.max_output_len:
            raise ValueError(
                f"dataset.output_len ({self.output_len}) exceeds dataset.max_output_len "
                f"({self.max_output_len})"
            )
        return self


class PrefixRepetitionDataset(_Outputs):
    """``num_prefixes`` long prompts, each sent ``repeats`` times (prefix-cache reuse)."""

    kind: Literal["prefix_repetition"] = Field(description="Dataset kind selector.")
    num_prefixes: int = Field(gt=0, description="Distinct shared prefixes (distinct prompts).")
    prefix_len: int = Field(gt=0, description="Tokens of each shared prefix.")
    suffix_len: int = Field(
        0, ge=0, description="Tokens of a per-request random suffix after the shared prefix."
    )
    repeats: int = Field(gt=0, description="How many times each prefix is sent.")
    output_len: int = Field(gt=0, description="Output length in tokens of every request.")
    output_range_ratio: float = Field(0.0, ge=0.0, lt=1.0, description=_RATIO)
    shuffle: bool = Field(True, description="Interleave repeats in a seeded order.")
    vocab_size: int | None = Field(
        None, ge=2, description="Token id bound, as for random (unset: the served model's)."
    )


class CodeEditDataset(_Outputs):
    """A coding assistant's traffic: ``num_files`` files, each sent with ``edits`` different
    edit requests (the file is a shared prefix, so prefix caching is measured), written from
    a few recurring line shapes as code repeats its idioms (so prompt-lookup speculative
    decoding finds drafts it can propose, as it never does in uniformly random ids)."""

    kind: Literal["code_edit"] = Field(description="Dataset kind selector.")
    num_files: int = Field(gt=0, description="Distinct files (shared prefixes).")
    file_len: int = Field(gt=0, description="Tokens of each file (before range_ratio).")
    range_ratio: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="File lengths are drawn uniformly from [len*(1-r), len*(1+r)]; 0 = exact.",
    )
    edits: int = Field(gt=0, description="Edit requests sent per file.")
    request_len: int = Field(
        64, ge=0, description="Tokens of each edit request after its file (fresh content)."
    )
    output_len: int = Field(
        gt=0, description="Output length in tokens (before output_range_ratio)."
    )
    output_range_ratio: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Each request's output length is drawn uniformly from "
        "[output_len*(1-r), output_len*(1+r)]; 0 = every request output_len.",
    )
    line_len: int = Field(12, ge=4, description="Tokens per line of a file.")
    idioms: int = Field(
        48,
        gt=0,
        description="Distinct line shapes a set of files is written from: fewer repeat more "
        "(each line keeps one fresh identifier token of its own).",
    )
    shuffle: bool = Field(True, description="Interleave the edits of different files.")
    vocab_size: int | None = Field(
        None, ge=2, description="Token id bound, as for random (unset: the served model's)."
    )


class LongPromptDataset(_Outputs):
    """Long single prompts (e.g. one 150K-token sequence), each with a distinct content."""

    kind: Literal["long_prompt"] = Field(description="Dataset kind selector.")
    input_len: int = Field(gt=0, description="Prompt length in tokens.")
    output_len: int = Field(gt=0, description="Output length in tokens.")
    output_range_ratio: float = Field(0.0, ge=0.0, lt=1.0, description=_RATIO)
    vocab_size: int | None = Field(
        None, ge=2, description="Token id bound, as for random (unset: the served model's)."
    )


DatasetSpec = Annotated[
    RandomDataset | ShareGPTDataset | PrefixRepetitionDataset | CodeEditDataset | LongPromptDataset,
    Field(discriminator="kind"),
]


# Long enough for a cold kernel or a prefill of every prompt of a tier at once; a hung engine
# costs this, not every request's timeout.
STALL_FLOOR_S = 120.0


class WorkloadSpec(_Strict):
    """What a trial sends against one running engine, tier after tier."""

    dataset: DatasetSpec = Field(description="How prompts and output lengths are made.")
    num_prompts: int | None = Field(
        None,
        gt=0,
        description=(
            "Measured requests per tier. Defaults: num_prefixes*repeats for prefix_repetition, "
            "num_files*edits for code_edit (fewer or more cycle through them), 1 for "
            "long_prompt; required otherwise."
        ),
    )
    warmup: int = Field(1, ge=0, description="Requests sent before each run, not measured.")
    tiers: list[int] = Field(
        description="Concurrency tiers: N requests in flight (closed loop), run in order."
    )
    request_rate: float | None = Field(
        None,
        gt=0,
        description="Open loop: mean requests/s (arrivals capped by the tier's concurrency).",
    )
    burstiness: float = Field(
        1.0,
        gt=0,
        description="Gamma shape of inter-arrival times (1 = Poisson), as vllm bench serve.",
    )
    seed: int = Field(0, ge=0, description="Seed of every random choice (same requests).")
    tokenizer: Path | None = Field(
        None,
        description="Local HF tokenizer folder or tokenizer.json (relative to the space file's "
        "folder) whose vocabulary bounds random token ids where the dataset's vocab_size is "
        "unset; default: the model's folder, else the one the server lists in /v1/models.",
    )
    endpoint: Literal["completions", "chat"] = Field(
        "completions", description="/v1/completions (token-id prompts) or /v1/chat/completions."
    )
    request_timeout_s: float = Field(
        600.0, gt=0, description="Per-request limit; a request over it fails as 'timeout'."
    )
    steady_state: bool = Field(
        False,
        description="Measure TPOT, ITL and the throughputs only over the window when all of a "
        "tier's streams were in flight: from the first arrival after the ramp-up wave (the "
        "first `concurrency` requests) to the last arrival, when the drain begins. TPOT and ITL "
        "are those of the requests sent after the ramp-up that finished before the drain; "
        "throughputs count what was streamed inside the window. TTFT, E2EL and failures still "
        "cover every request. The tier records how many requests the window holds "
        "(steady_requests) and its length (steady_window_s); a window holding fewer requests "
        "than the tier has streams leaves those figures out and says so in the tier's notes. "
        "A closed loop leaves about num_prompts - 2 x concurrency requests in the window, so "
        "send at least 3 x the largest tier. Off: the whole tier, as vllm bench serve.",
    )
    stall_floor_s: float = Field(
        STALL_FLOOR_S,
        gt=0,
        description="Shortest silence (requests in flight, no token from any stream and no "
        "request ending) taken for a hung engine. The window is ten times the longest "
        "silence seen so far in the run, at least this, and under request_timeout_s.",
    )
    client_cpus: list[int] = Field(
        default_factory=list,
        description="Cores the benchmark client runs on while it measures (empty: anywhere). "
        "Where the engine runs on the same machine, give it a core the engine leaves "
        "(target.engine_cpus / engine_nice), so its timing is not the engine's to spoil.",
    )
    long_gap_s: float = Field(
        LONG_GAP_S,
        gt=0,
        description="A gap between two chunks of one answer longer than this (seconds) counts "
        "as a stall: each tier records how many (long_gaps), the most one request met "
        "(max_long_gaps) and the requests that met one (long_gap_requests).",
    )
    client_lag_limit_ms: float | None = Field(
        None,
        gt=0,
        description="p99 event-loop lag of the client above which a tier counts as limited by "
        "the client (default: 5 ms or half the tier's median ITL, whichever is larger). "
        "Raise it where the engine shares a few CPU cores with the client.",
    )

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
        self._check_tiers()
        self._resolve_num_prompts()
        self._check_sizes()
        if self.burstiness != 1.0 and self.request_rate is None:
            raise ValueError(
                f"workload.burstiness ({self.burstiness}) needs workload.request_rate: "
                "burstiness shapes open-loop arrivals only"
            )
        return self

    def _check_tiers(self) -> None:
        if not self.tiers:
            raise ValueError("workload.tiers must list at least one concurrency")
        bad = [t for t in self.tiers if t <= 0]
        if bad:
            raise ValueError(f"workload.tiers must be positive; got {bad}")
        dup = sorted({t for t in self.tiers if self.tiers.count(t) > 1})
        if dup:
            raise ValueError(f"workload.tiers must be unique; repeated: {dup}")

    def _resolve_num_prompts(self) -> None:
        ds = self.dataset
        if isinstance(ds, PrefixRepetitionDataset):
            total = ds.num_prefixes * ds.repeats
            if self.num_prompts not in (None, total):
                raise ValueError(
                    f"workload.num_prompts ({self.num_prompts}) must equal "
                    f"dataset.num_prefixes * dataset.repeats ({total}) or be left out"
                )
            self.num_prompts = total
        elif isinstance(ds, CodeEditDataset) and self.num_prompts is None:
            self.num_prompts = ds.num_files * ds.edits
        elif isinstance(ds, LongPromptDataset) and self.num_prompts is None:
            self.num_prompts = 1
        elif self.num_prompts is None:
            raise ValueError(f"workload.num_prompts is required for dataset kind {ds.kind!r}")

    def _check_sizes(self) -> None:
        ds = self.dataset
        for name, value in ds:
            if name.endswith("_len") and isinstance(value, int) and value > MAX_LEN:
                raise ValueError(f"workload.dataset.{name} ({value}) is over {MAX_LEN:,} tokens")
        tokens = self.requests_per_tier * _longest_prompt(ds)
        if tokens > MAX_TIER_TOKENS:
            raise ValueError(
                f"a tier of {self.requests_per_tier} requests of up to {_longest_prompt(ds):,} "
                f"tokens would build {tokens:,} prompt tokens (at most {MAX_TIER_TOKENS:,})"
            )
        for name in ("request_timeout_s", "stall_floor_s"):
            if getattr(self, name) > MAX_SECONDS:
                raise ValueError(f"workload.{name} ({getattr(self, name)}) is over a week")

    @property
    def requests_per_tier(self) -> int:
        """``num_prompts`` once resolved (always set after validation)."""
        assert self.num_prompts is not None
        return self.num_prompts


def _longest_prompt(
    ds: RandomDataset
    | ShareGPTDataset
    | PrefixRepetitionDataset
    | CodeEditDataset
    | LongPromptDataset,
) -> int:
    """Tokens of the longest prompt ``ds`` builds (a ShareGPT file's are as long as it is)."""
    if isinstance(ds, RandomDataset):
        return int(ds.input_len * (1 + ds.range_ratio)) + ds.prefix_len
    if isinstance(ds, PrefixRepetitionDataset):
        return ds.prefix_len + ds.suffix_len
    if isinstance(ds, CodeEditDataset):
        return int(ds.file_len * (1 + ds.range_ratio)) + ds.request_len
    return ds.input_len if isinstance(ds, LongPromptDataset) else 0
