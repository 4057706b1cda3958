"""Fixtures every test folder shares: one throwaway PostgreSQL cluster per session.

A shell script's background job (a CI step started with '&') begins with SIGINT ignored, and
every process it starts inherits that: the tests that press Ctrl-C on a child would never reach
it. Python's own handler here gives the children SIGINT back (a handler, unlike an ignored
signal, does not pass through exec).
"""

import signal

from tests.postgres import postgres

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

__all__ = ["postgres"]
