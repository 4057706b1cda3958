"""Per-tier Bayesian search on a linear surrogate: the next launch, one tier at a time.

A study has one objective per concurrency tier; trial ``n`` looks for the best config of tier
``n mod tiers`` (every launch still measures, and teaches, every tier). For that tier it fits
``tuner.samplers.surrogate.BayesLinear`` to the log of the trials' values at *all* tiers
(each at the tiers it was feasible at), with effects shared by the tiers plus effects of the
target tier alone: a kernel that is 10% faster is 10% faster at every tier, while the best
token budget depends on the tier. Two failure models, on every finished trial, learn which
configs are refused, crash or miss an SLO (at the target tier): a noisy-OR over knob values
and pairs (``tuner.samplers.failure_model``) and a linear model of the 0/1 outcome; candidates
both expect to fail are not proposed. Until two configs have worked, the launch is the one
least likely to fail under a posterior draw of the noisy-OR model.

Proposals alternate at random between two moves:
- a Thompson draw from the posterior, among candidates ``RADIUS`` knob from the best configs
  of the tier so far (a trust region: the model ranks well near what it has seen), widened
  knob by knob until it holds a candidate not expected to fail;
- the optimistic guess anywhere in the space (posterior mean minus ``OPTIMISM`` sd), which
  combines knob values measured good separately and tries values never measured.

A tier whose best has not improved for ``STALE_AFTER`` trials gets the optimistic guess every
time, under the looser ``STALE_LIMIT``: a search that settled early in a region (a value
blamed for a crash that only one of its combinations causes, say a MoE kernel at a large token
budget) is kept out of the better region by the failure models, and local draws do not leave.

Until every choice of every unordered knob (attention backend, MoE backend, ...) has been
launched once, each proposal launches one not yet launched, by the Thompson move near the best
configs: a choice never measured has only the prior, which ranks it below any value measured
good, so the kernel that is best everywhere could otherwise wait a dozen launches for its turn.

A trial that missed one tier's SLO (TTFT at c20, say) still teaches the tiers it was feasible
at, when it records feasibility per tier (its record's ``tier_ok``, which ``tune run`` sets):
it is a row of those tiers' objective data and a failure only for the tiers it failed.

A warm start (``tune run --warm-start``) gives the sampler an earlier study's measurements as
its prior (``tuner.samplers.prior``): the objective fit becomes "the earlier engine's fit,
weighted by what this engine's own launches say it is worth, plus a difference", so configs
the earlier engine measured good rank high before this one has launched them. Nothing else
reads the prior: the best configs, trust regions, staleness, failure models and the early
launch of every kernel are this study's own.

Candidates are every config of a finite space (up to ``MAX_ENUMERATED``) or random configs
plus the one-knob neighbours of every measured config; configs already measured or running are
not proposed again (from the first proposal on: before any trial has finished, the running trials'
knobs are the search space), and configs the space's rules forbid not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import RandomSampler
from optuna.search_space import IntersectionSearchSpace
from optuna.trial import FrozenTrial, TrialState

from tuner.samplers.failure_model import FailureModel, Ingredients
from tuner.samplers.observed import Observed, learns_from
from tuner.samplers.prior import Features, Hyper, Prior, PriorFit, fit_with_prior
from tuner.samplers.surrogate import (
    BayesLinear,
    Encoder,
    enumerate_points,
    numeric_choices,
    product_size,
)

Allowed = Callable[[dict[str, Any]], bool]
MAX_ENUMERATED = 20_000
RANDOM_CANDIDATES = 3_000
NUMERIC_GRID = 9  # values per int/float knob on a wide range
RISK_LIMIT = 0.3  # predicted failure (0..1) above which a candidate is not proposed
GREEDY_SHARE = 0.33  # proposals that take the optimistic guess anywhere in the space
OPTIMISM = 1.0  # posterior sd subtracted from the predicted value in those proposals
STALE_AFTER = 10  # trials without a new best at the tier after which every proposal for it ...
STALE_LIMIT = 0.5  # ... is the optimistic guess, with this risk limit instead of RISK_LIMIT
TOP_K = 3  # the trust region surrounds the best few configs of the tier
RADIUS = 1  # ... this many changed knobs, at first; measured against 2 in bench/README.md


class AdditiveSampler(optuna.samplers.BaseSampler):
    """Per-tier Thompson / optimistic sampler; see the module docstring."""

    def __init__(
        self,
        seed: int | None = None,
        allowed: Allowed | None = None,
        tiers: Sequence[int] | None = None,
        unordered: frozenset[str] = frozenset(),
        prior: Prior | None = None,
    ) -> None:
        self.tiers = list(tiers) if tiers is not None else None
        self.unordered = unordered  # knobs whose numeric choices are not in the knob's order
        self.rng = np.random.default_rng(seed)
        self.allowed = allowed or (lambda point: True)
        self.fallback = RandomSampler(seed=seed)
        self.space = IntersectionSearchSpace()
        # per tier: the own measurements when the earlier study's weight and the prior scales
        # were chosen, and that choice
        self._fits: dict[int, tuple[int, tuple[float, Hyper]]] = {}
        self.prior = PriorFit(prior) if prior is not None else None  # a warm start's

    def reseed_rng(self) -> None:
        self.rng = np.random.default_rng()
        self.fallback.reseed_rng()

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        if space := self.space.calculate(study):
            return space
        # Nothing finished yet (a second worker joins while the first launch runs): the running
        # trials' knobs, so the proposal already skips the configs they are measuring.
        running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        widest = max(running, key=lambda t: len(t.distributions), default=None)
        return dict(widest.distributions) if widest is not None else {}

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self.fallback.sample_independent(study, trial, param_name, param_distribution)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        done = [
            t
            for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if search_space.keys() <= t.params.keys() and self.allowed(t.params) and learns_from(t)
        ]
        running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        taken = {_key(t.params, search_space) for t in [*done, *running] if t.params}
        values = {name: knob_values(d, done, name) for name, d in search_space.items()}
        pool = [
            p
            for p in self._candidates(values, done)
            if _key(p, search_space) not in taken and self.allowed(p)
        ]
        if not pool:
            return {}  # everything measured: the random fallback samples each knob
        fresh = covering(pool, [*done, *running], search_space, self.unordered)
        if not done:
            return fresh[int(self.rng.integers(len(fresh)))]
        data = Observed(done, study.directions, trial.number % len(study.directions), self.tiers)
        greedy = bool(self.rng.random() < GREEDY_SHARE)
        stuck = data.stale() >= STALE_AFTER
        if len(fresh) < len(pool):  # a choice never launched yet: measure it next to the best
            pool, greedy, stuck = fresh, False, False
        dist = None if greedy or stuck else distance_to_best(pool, data.best(TOP_K), search_space)
        limit = STALE_LIMIT if stuck else RISK_LIMIT
        enc = Encoder(search_space, self.unordered)
        return pool[self._pick(enc, data, pool, dist, limit)]

    def _pick(
        self,
        enc: Encoder,
        data: Observed,
        pool: list[dict[str, Any]],
        dist: np.ndarray | None,
        limit: float,
    ) -> int:
        """Index of the candidate to launch: the best score among those not expected to fail
        (risk under ``limit``), a Thompson draw near the best (``dist`` given) or the optimistic
        guess anywhere."""
        main, pairs = enc.features([t.params for t in data.trials])
        cand = enc.features(pool)
        risk = np.zeros(len(pool))
        if not data.ok.all():
            risk = self._drawn_risk(enc, data, pool)
            if data.ok.sum() >= 2:
                # the noisy-OR blames a failure on a single value where only some combinations
                # of it fail; the linear 0/1 model sees those: held back only if both expect it
                linear = BayesLinear([main, pairs], (~data.ok).astype(float))
                risk = np.minimum(risk, linear.predict(cand, linear.mean))
        safe = risk < limit
        region = trust_region(dist, safe)
        least_risky = int(np.argmin(np.where(region, risk, np.inf)))
        if data.ok.sum() < 2:  # nothing to rank by yet
            if data.ok.all():
                return int(self.rng.choice(np.flatnonzero(region)))
            return least_risky  # under a draw of where configs work
        score = self._score(enc, data, [main, pairs], cand, thompson=dist is not None)
        allowed = safe & region
        return int(np.argmin(np.where(allowed, score, np.inf))) if allowed.any() else least_risky

    def _score(
        self, enc: Encoder, data: Observed, trials: Features, cand: Features, thompson: bool
    ) -> np.ndarray:
        """Each candidate's value at the target tier as the move sees it, lower is better: a
        posterior draw (Thompson), or the mean less ``OPTIMISM`` sd, so that values never tried
        get their turn; with a warm start's prior, its fit's share added (``prior``)."""
        blocks, y = data.design(*trials)
        offset, ahead = self._prior_offsets(enc, data, trials, cand)
        model, weight = fit_with_prior(blocks, y, offset, self._hyper(data))
        self._fits[data.tier] = (int(data.ok.sum()), (weight, model.hyper))
        rows = [*cand, *cand] if len(data.directions) > 1 else cand
        if thompson:
            score = model.predict(rows, model.draw(self.rng))
        else:
            score = model.predict(rows, model.mean) - OPTIMISM * model.sd(rows)
        return score + weight * ahead

    def _prior_offsets(
        self, enc: Encoder, data: Observed, trials: Features, cand: Features
    ) -> tuple[np.ndarray, np.ndarray]:
        """The earlier study's fit at the design's rows and at the candidates (zeros without
        a warm start)."""
        if self.prior is None:
            return np.zeros(len(data.rows()[0])), np.zeros(len(cand[0]))
        at_rows = self.prior.at_rows(enc, data.directions, trials, data.rows())
        return at_rows, self.prior.predict(enc, data.directions, data.tier, cand)

    def _drawn_risk(self, enc: Encoder, data: Observed, pool: list[dict[str, Any]]) -> np.ndarray:
        """Failure of each candidate under a posterior draw of the noisy-OR model
        (``tuner.samplers.failure_model``): it blames a failure on its suspect ingredients, so a
        value tried
        once next to a bad one stays in play, and drawn rather than averaged, a value blamed on
        thin evidence gets a second chance now and then."""
        ing = Ingredients(enc.space)
        blame = FailureModel(ing, ing.ids([t.params for t in data.trials]), ~data.ok)
        return blame.risk(ing.ids(pool), blame.draw(self.rng))

    def _hyper(self, data: Observed) -> tuple[float, Hyper] | None:
        """The tier's last choice of the earlier study's weight, prior scales and noise, until
        a quarter more data (at least 3 trials) call for choosing again: the choice costs far
        more than the fit."""
        n, hyper = self._fits.get(data.tier, (0, None))
        return hyper if data.ok.sum() < n + max(3, n // 4) else None

    def _candidates(
        self, values: dict[str, list[Any]], done: Sequence[FrozenTrial]
    ) -> list[dict[str, Any]]:
        if product_size(values) <= MAX_ENUMERATED:
            return enumerate_points(values)
        out = [
            {n: v[int(self.rng.integers(len(v)))] for n, v in values.items()}
            for _ in range(RANDOM_CANDIDATES)
        ]
        for best in done:
            out += neighbours({n: best.params[n] for n in values}, values)
        return out


def knob_values(dist: BaseDistribution, done: Sequence[FrozenTrial], name: str) -> list[Any]:
    """The values a knob's candidates take: every choice, every int of a short range, or a
    (log) grid over a wide one plus the values already tried."""
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    d: Any = dist
    step = d.step or (1 if isinstance(d.low, int) and isinstance(d.high, int) else None)
    if step is not None and not d.log and (d.high - d.low) / step < 16:
        return list(np.arange(d.low, d.high + step / 2, step).astype(type(d.low)).tolist())
    grid = (
        np.geomspace(d.low, d.high, NUMERIC_GRID)
        if d.log
        else np.linspace(d.low, d.high, NUMERIC_GRID)
    )
    values = {_snap(float(x), d) for x in grid} | {t.params[name] for t in done if name in t.params}
    return sorted(values)


def _snap(x: float, d: Any) -> Any:
    if d.step is not None:
        x = d.low + round((x - d.low) / d.step) * d.step
    x = min(max(x, d.low), d.high)
    return round(x) if isinstance(d.low, int) else x


def distance_to_best(
    pool: list[dict[str, Any]], best: Sequence[FrozenTrial], space: Mapping[str, Any]
) -> np.ndarray:
    """How many knobs each candidate changes from the nearest of the ``best`` configs (0 for
    every candidate when there are none)."""
    if not best:
        return np.zeros(len(pool), dtype=int)
    names = list(space)
    cand = np.array([[repr(p[n]) for n in names] for p in pool])
    tops = np.array([[repr(t.params[n]) for n in names] for t in best])
    return (cand[:, None, :] != tops[None, :, :]).sum(-1).min(1)


def trust_region(dist: np.ndarray | None, safe: np.ndarray) -> np.ndarray:
    """The candidates a proposal chooses from: all of them for the optimistic move (``dist``
    None); else those within ``RADIUS`` knobs of the best, the radius widened until the region
    holds a candidate not expected to fail (one knob away is where the model ranks best, but a
    region of nothing but likely failures would spend a launch on one of them)."""
    if dist is None:
        return np.ones(len(safe), dtype=bool)
    radii = range(RADIUS, int(dist.max(initial=0)) + 1)
    near = [dist <= r for r in radii if (dist <= r).any()]
    for region in near:
        if (region & safe).any():
            return region
    return near[0] if near else np.ones(len(safe), dtype=bool)


def neighbours(point: dict[str, Any], values: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every config one knob away from ``point``."""
    return [{**point, n: v} for n, vs in values.items() for v in vs if v != point[n]]


def _key(params: Mapping[str, Any], space: Mapping[str, BaseDistribution]) -> tuple[Any, ...]:
    return tuple(repr(params.get(n)) for n in space)


def covering(
    pool: list[dict[str, Any]],
    launched: Sequence[FrozenTrial],
    space: Mapping[str, BaseDistribution],
    unordered: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """The candidates that launch a choice of an unordered knob (a kernel, a backend, slot
    counts with an 'auto') that no trial has launched yet; all of ``pool`` once every choice
    has been. Ordered knobs are left out: their rank feature lets one launch teach its
    neighbours, an unordered choice's effect is known from its own launches only."""
    choices = {
        n: d.choices
        for n, d in space.items()
        if isinstance(d, CategoricalDistribution)
        and (n in unordered or not numeric_choices(d.choices))
    }
    seen = {(n, repr(t.params[n])) for t in launched for n in choices if n in t.params}
    unseen = {(n, repr(c)) for n, cs in choices.items() for c in cs} - seen
    if not unseen:  # the rest of the study: no scan of the pool
        return pool
    fresh = [p for p in pool if any((n, repr(p[n])) in unseen for n in choices)]
    return fresh or pool
