from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable

import httpx
import pytest

from objectives.transport import LeanTransport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
CHUNKED = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    return head + await reader.readexactly(length)


def run(
    handler: Handler,
    client_fn: Callable[[httpx.AsyncClient, str], Awaitable[object]],
    timeout: float = 5.0,
) -> object:
    async def go() -> object:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with httpx.AsyncClient(
                transport=LeanTransport(), timeout=httpx.Timeout(timeout)
            ) as http:
                return await client_fn(http, f"http://127.0.0.1:{port}")
        finally:
            server.close()

    return asyncio.run(go())


async def stream_reads(http: httpx.AsyncClient, url: str) -> tuple[bytes, list[float], int]:
    async with http.stream("POST", url + "/v1/completions", content=b"{}") as resp:
        clock = resp.extensions["arrival_time"]
        parts, times = [], []
        async for raw in resp.aiter_raw():
            parts.append(raw)
            times.append(clock())
        return b"".join(parts), times, resp.status_code


def test_chunked_body_split_across_reads_with_arrival_times() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        req = await read_request(reader)
        assert req.startswith(b"POST /v1/completions HTTP/1.1") and b"content-length: 2" in req
        # A chunk split over two reads, then one whole chunk, then the end with a trailer.
        for part in (
            CHUNKED + b"5;ext=1\r\nhel",
            b"lo\r\n",
            b"6\r\n world\r\n",
            b"0\r\nx-trailer: 1\r\n\r\n",
        ):
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.close()

    body, times, status = run(handler, stream_reads)  # type: ignore[misc]
    assert (body, status) == (b"hello world", 200)
    # One piece per socket read that completed data, stamped when that read arrived.
    assert len(times) == 2 and times[1] - times[0] >= 0.04


def test_sized_and_until_close_bodies() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\nboom")
        await read_request(reader)  # same connection: keep-alive
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nall until eof")
        await writer.drain()
        writer.close()

    async def client(http: httpx.AsyncClient, url: str) -> list[tuple[int, bytes]]:
        out = []
        for _ in range(2):
            resp = await http.post(url + "/x", content=b"{}")
            out.append((resp.status_code, resp.content))
        return out

    assert run(handler, client) == [(500, b"boom"), (200, b"all until eof")]


def test_keepalive_reuse_and_no_reuse_of_a_closed_connection() -> None:
    conns: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns.append(1)
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na")
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nb")
        await writer.drain()
        writer.close()  # a server that closes after two responses, advertising nothing

    async def client(http: httpx.AsyncClient, url: str) -> bytes:
        got = b""
        for _ in range(3):
            got += (await http.get(url)).content
            await asyncio.sleep(0.05)  # let the close arrive
        return got

    assert run(handler, client) == b"aba"
    assert len(conns) == 2


@pytest.mark.parametrize(
    ("reply", "error", "message"),
    [
        (CHUNKED + b"5\r\nhel", httpx.RemoteProtocolError, "complete message body"),
        (b"", httpx.RemoteProtocolError, "without sending a response"),
        (b"SPDY/9 200 OK\r\n\r\n", httpx.RemoteProtocolError, "malformed status line"),
        (CHUNKED + b"zz\r\n", httpx.RemoteProtocolError, "malformed chunk size"),
    ],
)
def test_protocol_faults(reply: bytes, error: type[Exception], message: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(reply)
        await writer.drain()
        writer.close()

    with pytest.raises(error, match=message):
        run(handler, stream_reads)


def test_read_timeout_when_the_server_goes_silent() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(CHUNKED + b"1\r\na\r\n")
        await asyncio.sleep(2)

    with pytest.raises(httpx.ReadTimeout):
        run(handler, stream_reads, timeout=0.3)


def test_connect_refused() -> None:
    async def client(http: httpx.AsyncClient, url: str) -> object:
        return await http.get("http://127.0.0.1:9/")

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    with pytest.raises(httpx.ConnectError):
        run(handler, client)


def test_https_goes_to_httpx_own_transport() -> None:
    async def client(http: httpx.AsyncClient, url: str) -> object:
        return await http.get("https://127.0.0.1:9/")

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    with pytest.raises(httpx.ConnectError):  # refused by the port, through httpcore
        run(handler, client)


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive stamps are Linux-only")
def test_kernel_receive_time_survives_a_busy_event_loop() -> None:
    # A blocking server thread: head, then a chunk 30 ms later, then another 100 ms after it.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(CHUNKED)
        for part in (b"1\r\na\r\n", b"1\r\nb\r\n0\r\n\r\n"):
            time.sleep(0.03 if part.startswith(b"1\r\na") else 0.1)
            conn.sendall(part)
        time.sleep(0.2)
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    async def client() -> list[float]:
        url = f"http://127.0.0.1:{port}/"
        async with (
            httpx.AsyncClient(transport=LeanTransport()) as http,
            http.stream("POST", url, content=b"{}") as resp,
        ):
            time.sleep(0.08)  # the loop is busy when the first chunk reaches the socket
            clock = resp.extensions["arrival_time"]
            return [clock() async for _ in resp.aiter_raw()]

    times = asyncio.run(client())
    thread.join(timeout=5)
    listener.close()
    assert len(times) == 2
    assert times[1] - times[0] > 0.09  # read 50 ms apart, received 100 ms apart
