"""Incremental Server-Sent Events parsing of raw network chunks.

A raw read may hold part of an event, one event, or several; the parser keeps the unfinished
tail and returns the ``data`` payload of every event the chunk completed, so the caller can
stamp all of them with the chunk's arrival time. Lines end with ``\\n`` or ``\\r\\n``;
comments (``: ping``) and fields other than ``data`` are skipped; several ``data`` lines of one
event are joined with ``\\n`` (the SSE standard).
"""

from __future__ import annotations

import json
from typing import Any

DONE = b"[DONE]"


class SSEParser:
    """Feed raw bytes, get completed event payloads (bytes) back."""

    __slots__ = ("_data", "_tail")

    def __init__(self) -> None:
        self._tail = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """Payloads of the events completed by ``chunk``, in order."""
        events: list[bytes] = []
        if self._tail or self._data or b"\r" in chunk:
            self._lines(self._tail + chunk, events)
            return events
        # Fast path for the usual shape, one ``data: ...`` line per event: whole events are
        # cut on blank lines; anything else goes line by line.
        blocks = chunk.split(b"\n\n")
        rest = blocks.pop()
        for block in blocks:
            if block.startswith(b"data: ") and b"\n" not in block:
                events.append(block[6:])
            else:
                self._lines(block + b"\n\n", events)
        self._lines(rest, events)
        return events

    def _lines(self, text: bytes, events: list[bytes]) -> None:
        lines = text.split(b"\n")
        self._tail = lines.pop()
        for line in lines:
            self._line(line[:-1] if line.endswith(b"\r") else line, events)

    def close(self) -> list[bytes]:
        """Payload of a last event the stream ended without a blank line after (if any)."""
        events: list[bytes] = []
        if self._tail:
            self._line(self._tail.removesuffix(b"\r"), events)
            self._tail = b""
        self._line(b"", events)
        return events

    def _line(self, line: bytes, events: list[bytes]) -> None:
        if not line:  # blank line: dispatch the event gathered so far
            if self._data:
                events.append(b"\n".join(self._data))
                self._data = []
            return
        if line.startswith(b":"):
            return
        name, _, value = line.partition(b":")
        if name == b"data":
            self._data.append(value[1:] if value.startswith(b" ") else value)


class MalformedChunk(ValueError):
    """An event payload that is neither ``[DONE]`` nor a JSON object."""


def decode(payload: bytes) -> dict[str, Any] | None:
    """The JSON object of a payload; ``None`` for ``[DONE]``."""
    if payload.strip() == DONE:
        return None
    try:
        obj = json.loads(payload.decode())  # str input skips json's encoding sniffing
    except (ValueError, UnicodeDecodeError, RecursionError):
        # RecursionError: nested deeper than json can parse; the server's bad event, like any
        raise MalformedChunk(f"malformed chunk: {payload[:80]!r}") from None
    if not isinstance(obj, dict):
        raise MalformedChunk(f"malformed chunk: {payload[:80]!r}")
    return obj
