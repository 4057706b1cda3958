"""Benchmarks of the tool: each script measures a claim and prints its figures side by side
with a baseline measured in the same run (see bench/README.md). Run one as a module from the
repository root: ``python -m bench.sample_efficiency``."""
