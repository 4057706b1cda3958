"""Scoring: who may be a tier's pick, the pick, each tier's front and the pick's one line.

A function of the trial record alone (``tuner.record``): the run loop asks it which configs to
confirm and what to print, ``tune capacity`` which configs to measure, and the exporters what
to render. It never renders and never runs a study.

- ``pooling``: every launch of one config pooled, and the run-to-run noise they reveal;
- ``eligible``: which feasible configs may be a pick (SLOs, throughput floor, held users);
- ``recommend``: the pick per tier, pooled, with its verdict against the baseline;
- ``why``: the pick's one line, what it gave up for what;
- ``tiers``: each tier's points and Pareto front, as the exports show them.
"""
