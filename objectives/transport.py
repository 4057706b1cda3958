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
from collections.abc import AsyncIterator
from typing import Any

import httpx

from objectives.http_conn import Conn, Watchdog
from objectives.stamped_socket import Address, StampedSocket, resolve

# Request extension: open a new connection instead of reusing an idle one (a retry after a
# pooled connection turned out closed, when others in the pool may be closed as well).
FRESH_CONNECTION = "fresh_connection"


class _Body(httpx.AsyncByteStream):
    """The body, one socket read at a time; ``arrival`` is the last one's arrival time."""

    def __init__(
        self,
        transport: LeanTransport,
        key: tuple[str, int],
        conn: Conn,
        read_timeout: float | None,
    ) -> None:
        self._t, self._key, self._conn = transport, key, conn
        self.arrival = 0.0
        self._watchdog = Watchdog(conn, read_timeout) if read_timeout else None

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


class LeanTransport(httpx.AsyncBaseTransport):
    """``http://`` requests over pooled ``Conn`` protocols; see the module docstring."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[Conn]] = {}
        self._open: set[Conn] = set()
        self._fallback: httpx.AsyncHTTPTransport | None = None  # made on first https use
        # Resolved once per run: a thread-pool lookup per connection staggers the sends of a
        # 1024-stream tier and lands in their TTFT.
        self._addresses: dict[tuple[str, int], Address] = {}

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

    async def _acquire(self, key: tuple[str, int], timeout: float | None, fresh: bool) -> Conn:
        idle = [] if fresh else self._idle.get(key, [])
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
            self._open.discard(conn)
        conn = Conn()
        try:
            async with asyncio.timeout(timeout):
                if key not in self._addresses:
                    self._addresses[key] = await resolve(*key)
                await StampedSocket.connect(self._addresses[key], conn)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connect to {key[0]}:{key[1]} timed out") from None
        except ConnectionRefusedError:  # its text ("Connect call failed") does not say so
            raise httpx.ConnectError(f"connect to {key[0]}:{key[1]}: connection refused") from None
        except OSError as err:
            raise httpx.ConnectError(f"connect to {key[0]}:{key[1]}: {err}") from None
        self._open.add(conn)
        return conn

    def release(self, key: tuple[str, int], conn: Conn) -> None:
        """Back to the idle pool when its response was read whole; closed otherwise."""
        if conn.mode == "done" and not conn.closed and not conn.buf:
            self._idle.setdefault(key, []).append(conn)
        else:
            self._discard(conn)

    def _discard(self, conn: Conn) -> None:
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
