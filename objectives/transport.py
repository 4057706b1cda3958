"""A lean HTTP/1.1 transport for ``httpx.AsyncClient``, built for many concurrent streams.

httpx's default transport (httpcore + h11 + anyio) spends tens of microseconds of CPU per
streamed chunk and scans its whole pool for every queued request; at hundreds of streams on a
small machine that CPU time shows up as delay in the very timestamps being measured. This
transport keeps the httpx API (one ``AsyncClient`` per run, its timeouts, its exceptions) and
does the minimum per chunk: a socket read (``recvmsg``, stamped with the kernel's receive time)
is decoded from chunked framing at once and handed to the reader with that time, exposed as the
response extension ``arrival_time``. Delays of this process shorter than the gap between two
chunks then leave ITL untouched; longer ones merge chunks into one read, which shares its
stamp. Plain ``http://`` only; other schemes go to httpx's own transport. Idle keep-alive
connections are reused; one the server closed is never handed out again.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from collections import deque
from collections.abc import AsyncIterator
from time import perf_counter
from typing import Any

import httpx

_MAX_HEAD = 64 * 1024
# Request extension: open a new connection instead of reusing an idle one (a retry after a
# pooled connection turned out closed, when others in the pool may be closed as well).
FRESH_CONNECTION = "fresh_connection"
_READ_SIZE = 256 * 1024
_ANC_SIZE = socket.CMSG_SPACE(16)
# SO_TIMESTAMPNS (Linux; the socket module has no name for it): receive times in a cmsg.
_SO_TIMESTAMPNS = 35
_STAMPS = sys.platform == "linux"
_STAMP_WINDOW_S = 5.0


class _Conn:
    """One connection: parses a response head, then chunked / sized / until-close bodies."""

    def __init__(self) -> None:
        self.transport: _StampedSocket | None = None
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

    def connection_made(self, transport: _StampedSocket) -> None:
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
                raise httpx.RemoteProtocolError("response head too large")
            return False
        lines = self.buf[:end].split(b"\r\n")
        self.buf = self.buf[end + 4 :]
        status, headers = _parse_status(lines[0]), _parse_headers(lines[1:])
        names = {k.lower(): v for k, v in headers}
        if b"chunked" in names.get(b"transfer-encoding", b"").lower():
            self.mode = "chunked"
        elif b"content-length" in names:
            self.mode, self.remaining = "sized", int(names[b"content-length"])
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
            raise httpx.RemoteProtocolError("malformed chunk size") from None
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
        raise httpx.RemoteProtocolError(f"malformed status line {line[:60]!r}")
    return int(parts[1])


def _parse_headers(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    out = []
    for line in lines:
        name, sep, value = line.partition(b":")
        if not sep:
            raise httpx.RemoteProtocolError(f"malformed header {line[:60]!r}")
        out.append((name.strip(), value.strip()))
    return out


class _Body(httpx.AsyncByteStream):
    """The body, one socket read at a time; ``arrival`` is the last one's arrival time."""

    def __init__(
        self,
        transport: LeanTransport,
        key: tuple[str, int],
        conn: _Conn,
        read_timeout: float | None,
    ) -> None:
        self._t, self._key, self._conn = transport, key, conn
        self.arrival = 0.0
        self._watchdog = _Watchdog(conn, read_timeout) if read_timeout else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while True:
            if conn.pieces:
                self.arrival, data = conn.pieces.popleft()
                yield data
            elif conn.mode == "done":
                return
            elif conn.error is not None:
                raise conn.error
            else:
                conn.waiter = asyncio.get_running_loop().create_future()
                await conn.waiter
                conn.waiter = None

    async def aclose(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._t.release(self._key, self._conn)


class _Watchdog:
    """Read timeout without a timer per chunk: fails the stream after a silent period."""

    def __init__(self, conn: _Conn, timeout: float) -> None:
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


_Address = tuple[int, int, int, Any]  # family, type, proto, sockaddr


async def _resolve(host: str, port: int) -> _Address:
    family, kind, proto, _, addr = (
        await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    )[0]
    return family, kind, proto, addr


class _StampedSocket:
    """A non-blocking TCP socket read with ``recvmsg``, each read stamped by the kernel.

    With ``SO_TIMESTAMPNS`` the kernel records when the data reached the socket, so a chunk's
    time does not move when this process is descheduled or its event loop is busy: on a loaded
    client machine that delay would otherwise land in every ITL. The stamp (wall clock) is
    mapped to ``perf_counter`` with an offset taken at connect; a stamp that does not fall in
    the last few seconds (no support, a clock step) is replaced by ``perf_counter()``.
    """

    def __init__(self, sock: socket.socket, conn: _Conn) -> None:
        self.sock, self.conn, self.fd = sock, conn, sock.fileno()
        self.loop = asyncio.get_running_loop()
        self.offset = time.time() - perf_counter()
        self.out = bytearray()
        self.closed = False
        conn.connection_made(self)
        self.loop.add_reader(self.fd, self._readable)

    @classmethod
    async def connect(cls, target: _Address, conn: _Conn) -> _StampedSocket:
        loop = asyncio.get_running_loop()
        family, kind, proto, addr = target
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if _STAMPS:
                sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            await loop.sock_connect(sock, addr)
        except BaseException:
            sock.close()
            raise
        return cls(sock, conn)

    def _readable(self) -> None:
        try:
            data, anc, _, _ = self.sock.recvmsg(_READ_SIZE, _ANC_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            self._close(err)
            return
        if not data:
            self._close(None)
            return
        self.conn.data_received(data, self._stamp(anc))

    def _stamp(self, anc: list[tuple[int, int, bytes]]) -> float:
        now = perf_counter()
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(raw) >= 16:
                sec, nsec = struct.unpack_from("@ll", raw)
                stamp = sec + nsec * 1e-9 - self.offset
                if now - _STAMP_WINDOW_S < stamp <= now + 0.001:
                    return min(stamp, now)
        return now

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.out:
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as err:
                self._close(err)
                return
            data = data[sent:]
            if not data:
                return
            self.loop.add_writer(self.fd, self._writable)
        self.out += data

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            self._close(err)
            return
        del self.out[:sent]
        if not self.out:
            self.loop.remove_writer(self.fd)

    def is_closing(self) -> bool:
        return self.closed

    def abort(self) -> None:
        self._close(None)

    def _close(self, exc: Exception | None) -> None:
        if self.closed:
            return
        self.closed = True
        self.loop.remove_reader(self.fd)
        self.loop.remove_writer(self.fd)
        self.sock.close()
        self.conn.connection_lost(exc)


class LeanTransport(httpx.AsyncBaseTransport):
    """``http://`` requests over pooled ``_Conn`` protocols; see the module docstring."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._open: set[_Conn] = set()
        self._fallback: httpx.AsyncHTTPTransport | None = None  # made on first https use
        # Resolved once per run: a thread-pool lookup per connection staggers the sends of a
        # 1024-stream tier and lands in their TTFT.
        self._addresses: dict[tuple[str, int], _Address] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            if self._fallback is None:  # its TLS context costs ~50 ms to load
                self._fallback = httpx.AsyncHTTPTransport()
            return await self._fallback.handle_async_request(request)
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        key = (request.url.host, request.url.port or 80)
        fresh = bool(request.extensions.get(FRESH_CONNECTION))
        conn = await self._acquire(key, timeouts.get("connect"), fresh)
        conn.reset()
        conn.head = asyncio.get_running_loop().create_future()
        assert conn.transport is not None
        conn.transport.write(_request_bytes(request))
        try:
            async with asyncio.timeout(timeouts.get("read")):
                status, headers = await conn.head
        except TimeoutError:
            self._discard(conn)
            raise httpx.ReadTimeout("timed out waiting for the response head") from None
        except httpx.HTTPError:
            self._discard(conn)
            raise
        body = _Body(self, key, conn, timeouts.get("read"))
        # "arrival_time" lets a reader stamp each raw read when it reached the socket rather
        # than when its task got to run.
        extensions = {"http_version": b"HTTP/1.1", "arrival_time": lambda: body.arrival}
        return httpx.Response(status, headers=headers, stream=body, extensions=extensions)

    async def _acquire(self, key: tuple[str, int], timeout: float | None, fresh: bool) -> _Conn:
        idle = [] if fresh else self._idle.get(key, [])
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
            self._open.discard(conn)
        conn = _Conn()
        try:
            async with asyncio.timeout(timeout):
                if key not in self._addresses:
                    self._addresses[key] = await _resolve(*key)
                await _StampedSocket.connect(self._addresses[key], conn)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connect to {key[0]}:{key[1]} timed out") from None
        except ConnectionRefusedError:  # its text ("Connect call failed") does not say so
            raise httpx.ConnectError(f"connect to {key[0]}:{key[1]}: connection refused") from None
        except OSError as err:
            raise httpx.ConnectError(f"connect to {key[0]}:{key[1]}: {err}") from None
        self._open.add(conn)
        return conn

    def release(self, key: tuple[str, int], conn: _Conn) -> None:
        """Back to the idle pool when its response was read whole; closed otherwise."""
        if conn.mode == "done" and not conn.closed and not conn.buf:
            self._idle.setdefault(key, []).append(conn)
        else:
            self._discard(conn)

    def _discard(self, conn: _Conn) -> None:
        self._open.discard(conn)
        if conn.transport is not None:
            conn.transport.abort()

    async def aclose(self) -> None:
        for conn in list(self._open):
            self._discard(conn)
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()


def _request_bytes(request: httpx.Request) -> bytes:
    body = request.content
    head = [b"%s %s HTTP/1.1" % (request.method.encode(), request.url.raw_path)]
    head.extend(
        b"%s: %s" % (k, v)
        for k, v in request.headers.raw
        if k.lower() not in (b"content-length", b"transfer-encoding")
    )
    head.append(b"content-length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body
