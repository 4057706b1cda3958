"""One whole answer from a server, within a deadline for all of it.

httpx's timeouts bound each read, not the answer: a server that drips one byte a second never
times out, and a scrape of its ``/metrics`` or a probe of its ``/health`` waits for ever. Every
read the tool makes of a server outside a benchmark's streams (whose requests have their own
deadline and the hung-engine watch) goes through here: the request and its whole body, or
``AnswerTimeout`` at the deadline.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from objectives.transport import LeanTransport


class AnswerTimeout(httpx.TimeoutException):
    """No whole answer by the deadline (an ``httpx.TimeoutException``, so every caller that
    handles a timed-out read handles this one too)."""


async def fetch(
    http: httpx.AsyncClient, method: str, url: str, seconds: float, **kwargs: Any
) -> httpx.Response:
    """``http.request(method, url)`` with its whole body read, in ``seconds`` at most.

    Raises:
        AnswerTimeout: at the deadline, whatever the server was still sending.
    """
    try:
        async with asyncio.timeout(seconds):
            return await http.request(method, url, **kwargs)
    except TimeoutError:
        raise AnswerTimeout(f"no whole answer from {url} within {seconds:g} s") from None


def fetch_sync(
    method: str,
    url: str,
    seconds: float,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """``fetch`` for callers without an event loop (a launcher's ready probe, a one-off
    look-up): one connection of its own, closed before returning.

    Raises:
        AnswerTimeout: at the deadline.
        httpx.HTTPError: the request failed otherwise.
    """

    async def once() -> httpx.Response:
        # The lean transport: no TLS context is loaded for a plain http:// probe.
        async with httpx.AsyncClient(
            transport=LeanTransport(), headers=headers, timeout=seconds
        ) as http:
            return await fetch(http, method, url, seconds, **kwargs)

    return asyncio.run(once())
