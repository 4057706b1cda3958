"""A TCP socket read with ``recvmsg``, each read stamped with the kernel's receive time.

The lean transport (``objectives.transport``) reads its streams through it: a read's stamp,
not the moment this process got round to it, is when a chunk arrived.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from time import perf_counter
from typing import Any, Protocol

_READ_SIZE = 256 * 1024
_ANC_SIZE = socket.CMSG_SPACE(16)
# SO_TIMESTAMPNS (Linux; the socket module has no name for it): receive times in a cmsg.
_SO_TIMESTAMPNS = 35
_STAMPS = sys.platform == "linux"
_STAMP_WINDOW_S = 5.0


class Receiver(Protocol):
    """What a stamped socket hands its reads to (``objectives.http_conn.Conn``)."""

    def connection_made(self, transport: StampedSocket) -> None: ...

    def data_received(self, data: bytes, arrival: float) -> None: ...

    def connection_lost(self, exc: Exception | None) -> None: ...


Address = tuple[int, int, int, Any]  # family, type, proto, sockaddr


async def resolve(host: str, port: int) -> Address:
    family, kind, proto, _, addr = (
        await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    )[0]
    return family, kind, proto, addr


class StampedSocket:
    """A non-blocking TCP socket read with ``recvmsg``, each read stamped by the kernel.

    With ``SO_TIMESTAMPNS`` the kernel records when the data reached the socket, so a chunk's
    time does not move when this process is descheduled or its event loop is busy: on a loaded
    client machine that delay would otherwise land in every ITL. The stamp (wall clock) is
    mapped to ``perf_counter`` with an offset taken at connect; a stamp that does not fall in
    the last few seconds (no support, a clock step) is replaced by ``perf_counter()``.
    """

    def __init__(self, sock: socket.socket, conn: Receiver) -> None:
        self.sock, self.conn, self.fd = sock, conn, sock.fileno()
        self.loop = asyncio.get_running_loop()
        self.offset = time.time() - perf_counter()
        self.out = bytearray()
        self.closed = False
        conn.connection_made(self)
        self.loop.add_reader(self.fd, self._readable)

    @classmethod
    async def connect(cls, target: Address, conn: Receiver) -> StampedSocket:
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
