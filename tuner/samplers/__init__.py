"""Samplers: what the study launches next, chosen by name (``tune run --sampler NAME``).

The contract every sampler of ``SAMPLERS`` keeps, checked on each by one contract test
(``tests/tuner/samplers/test_contract.py``):

- it is an Optuna ``BaseSampler`` built from the space alone (``make_sampler(name, space)``),
  seeded by ``study.seed``: the same seed proposes the same configs in the same order;
- it sees one objective per concurrency tier and the loop's constraint values (rules, engine,
  failed_requests, slo; a trial is feasible when all are <= 0), and keeps proposing, within
  the space's values, after infeasible trials and after rule refusals;
- the samplers of this package (``additive``, ``grid``) never propose a config the space's
  rules forbid, nor one already measured; Optuna's own samplers may, and the run loop answers
  those without a launch (a rule refusal is free, a repeat reuses the measured launch);
- a warm start's earlier measurements (``prior.Prior``) reach the samplers of
  ``registry.LEARNS_PRIOR`` (``additive``) as a prior, never as trials of the study; every
  sampler runs the warm start's queued configs first, as it runs the baseline.

One module per sampler of ours: ``additive`` (per-tier Bayesian search, with ``surrogate``,
``observed`` (what its models learn from), ``prior`` (a warm start's) and ``failure_model``),
``tiered`` (one tier per trial around any Optuna sampler), ``grid`` (a nested-loop walk);
``registry`` maps names to factories.
"""

from tuner.samplers.registry import (
    DEFAULT_SAMPLER,
    SAMPLERS,
    check_sampler,
    grid_values,
    make_sampler,
)

__all__ = ["DEFAULT_SAMPLER", "SAMPLERS", "check_sampler", "grid_values", "make_sampler"]
