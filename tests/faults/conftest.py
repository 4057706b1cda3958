"""The small simulated-engine space of the study tests, for the fault tests."""

from tests.tuner.conftest import small_space, space_file

__all__ = ["small_space", "space_file"]
