"""Fixtures every test folder shares: one throwaway PostgreSQL cluster per session."""

from tests.postgres import postgres

__all__ = ["postgres"]
