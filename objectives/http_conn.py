"""One HTTP/1.1 connection of the lean transport: response heads and chunked, sized or
until-close bodies parsed as each stamped read arrives, and the read timeout that needs no
timer per chunk."""

from __future__ import annotations

import asyncio
from collections import deque
from time import perf_counter

import httpx

from objectives.stamped_socket import StampedSocket

_MAX_HEAD = 64 * 1024


class MalformedResponse(httpx.RemoteProtocolError):
    """A response that breaks HTTP/1.1 framing (status line, a header, a length, a chunk size):
    the server's fault, told apart from a connection that merely ended."""


class Conn:
    """One connection: parses a response head, then chunked / sized / until-close bodies."""

    def __init__(self) -> None:
        self.transport: StampedSocket | None = None
        self.closed = False
        self.reset()

    def reset(self) -> None:
        self.buf = b""
        self.head: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] | None = None
        self.pieces: deque[tuple[float, bytes]] = deque()  # (arrival time, body bytes)
        self.reads = 0  # socket reads so far: the read-timeout watchdog's sign of life
        self.waiter: asyncio.Future[None] | None = None
        self.mode = "head"  # head -> chunked / sized / eof -> done
        self.now = 0.0
        self.remaining = 0
        self.error: Exception | None = None

    def connection_made(self, transport: StampedSocket) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.mode == "eof":
            self.mode = "done"
        elif self.mode != "done":
            self._fail(httpx.RemoteProtocolError(_lost_message(self.mode)))
        self._wake()

    def data_received(self, data: bytes, arrival: float | None = None) -> None:
        # The kernel's receive time when the socket gives one, else now, before any parsing.
        self.now = perf_counter() if arrival is None else arrival
        self.reads += 1
        self.buf += data
        try:
            self._parse()
        except httpx.RemoteProtocolError as err:
            self._fail(err)
            if self.transport is not None:
                self.transport.abort()
        self._wake()

    def _parse(self) -> None:
        while self.buf and self.mode not in ("done",):
            progressed = getattr(self, f"_parse_{self.mode}")()
            if not progressed:
                return

    def _parse_head(self) -> bool:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > _MAX_HEAD:
                raise MalformedResponse("response head too large")
            return False
        lines = self.buf[:end].split(b"\r\n")
        self.buf = self.buf[end + 4 :]
        status, headers = _parse_status(lines[0]), _parse_headers(lines[1:])
        names = {k.lower(): v for k, v in headers}
        if b"chunked" in names.get(b"transfer-encoding", b"").lower():
            self.mode = "chunked"
        elif b"content-length" in names:
            self.remaining = _content_length(names[b"content-length"])
            self.mode = "sized" if self.remaining else "done"
        else:
            self.mode = "eof"
        if self.head is not None and not self.head.done():
            self.head.set_result((status, headers))
        return True

    def _parse_sized(self) -> bool:
        take, self.buf = self.buf[: self.remaining], self.buf[self.remaining :]
        self.remaining -= len(take)
        self._add(take)
        if self.remaining == 0:
            self.mode = "done"
        return True

    def _parse_eof(self) -> bool:
        self._add(self.buf)
        self.buf = b""
        return False

    def _parse_chunked(self) -> bool:
        # Consume as many whole chunks as the buffer holds; keep a partial one for later.
        line_end = self.buf.find(b"\r\n")
        if line_end < 0:
            return False
        try:
            size = int(self.buf[:line_end].split(b";", 1)[0], 16)
        except ValueError:
            raise MalformedResponse("malformed chunk size") from None
        if size == 0:
            return self._parse_trailer(line_end + 2)
        end = line_end + 2 + size
        if len(self.buf) < end + 2:
            return False
        self._add(self.buf[line_end + 2 : end])
        self.buf = self.buf[end + 2 :]
        return True

    def _parse_trailer(self, start: int) -> bool:
        end = self.buf.find(b"\r\n", start)
        while end >= 0 and end != start:  # skip trailer fields up to the blank line
            start, end = end + 2, self.buf.find(b"\r\n", end + 2)
        if end < 0:
            return False
        self.buf, self.mode = self.buf[end + 2 :], "done"
        return True

    def _add(self, data: bytes) -> None:
        # Bytes of one socket read travel together, with that read's arrival time.
        if self.pieces and self.pieces[-1][0] == self.now:
            self.pieces[-1] = (self.now, self.pieces[-1][1] + data)
        else:
            self.pieces.append((self.now, data))

    def _fail(self, err: Exception) -> None:
        if self.error is None:
            self.error = err
        if self.head is not None and not self.head.done():
            self.head.set_exception(err)

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


def _lost_message(mode: str) -> str:
    if mode == "head":
        return "Server disconnected without sending a response."
    return "peer closed connection without sending complete message body"


def _parse_status(line: bytes) -> int:
    parts = line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise MalformedResponse(f"malformed status line {line[:60]!r}")
    return int(parts[1])


def _content_length(value: bytes) -> int:
    # Digits only: int() takes "-5" (the sized parser would then never reach its end and spin)
    # and raises a bare ValueError on "abc", which is no HTTP error to the reader.
    if not value.isdigit():
        raise MalformedResponse(f"malformed Content-Length {value[:40]!r}")
    return int(value)


def _parse_headers(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    out = []
    for line in lines:
        name, sep, value = line.partition(b":")
        if not sep:
            raise MalformedResponse(f"malformed header {line[:60]!r}")
        out.append((name.strip(), value.strip()))
    return out


class Watchdog:
    """Read timeout without a timer per chunk: fails the stream after a silent period."""

    def __init__(self, conn: Conn, timeout: float) -> None:
        self._conn, self._timeout, self._seen = conn, timeout, conn.reads
        self._handle = asyncio.get_running_loop().call_later(timeout, self._check)

    def _check(self) -> None:
        conn = self._conn
        if conn.mode == "done" or conn.error is not None:
            return
        if conn.reads == self._seen:
            conn._fail(httpx.ReadTimeout("no data from the server within the read timeout"))
            conn._wake()
            if conn.transport is not None:
                conn.transport.abort()
            return
        self._seen = conn.reads
        self._handle = asyncio.get_running_loop().call_later(self._timeout, self._check)

    def cancel(self) -> None:
        self._handle.cancel()
