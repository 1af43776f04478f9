"""The SDK worker's own HTTP/1.1 transport (`ostinato.sdk.worker._Http11`) against a real
uvicorn + Litestar server on loopback and a raw asyncio server (edge framings: chunked,
close-delimited, `Connection: close`, informational responses, a server closing an idle
connection), on asyncio and uvloop. No database or broker."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from litestar import Litestar, Request, Response, post
from litestar.response import Stream

from ostinato.sdk.worker import _Http11
from tests.helpers.waiting import eventually

peers: list[tuple[str, int]] = []
disconnects: list[str] = []
arrived: list[str] = []


@post("/v1/echo", status_code=200)
async def echo(request: Request) -> Response[bytes]:
    peers.append(request.client)  # type: ignore[arg-type]
    body = await request.body()
    return Response(body, status_code=200, media_type="application/json",
                    headers={"x-auth": request.headers.get("authorization", "")})


@post("/v1/problem", status_code=200)
async def problem() -> Response[bytes]:
    return Response(b'{"title":"Stale","status":409,"detail":"lost"}', status_code=409,
                    media_type="application/problem+json")


@post("/v1/slow", status_code=200)
async def slow(request: Request) -> Response[bytes]:
    await request.body()
    arrived.append("slow")
    gone = asyncio.ensure_future(request.receive())
    done, _ = await asyncio.wait([gone], timeout=60)  # the client's hang-up ends it at once
    if done and gone.result()["type"] == "http.disconnect":
        disconnects.append("slow")
    return Response(b"{}", status_code=200)


@post("/v1/chunked", status_code=200)
async def chunked() -> Stream:
    async def gen() -> AsyncIterator[bytes]:
        for i in range(5):
            yield b'{"part":%d}' % i
    return Stream(gen())


@post("/v1/close", status_code=200)
async def close_after() -> Response[bytes]:
    return Response(b'{"ok":1}', status_code=200, headers={"connection": "close"})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
async def server() -> AsyncIterator[int]:
    port = free_port()
    app = Litestar([echo, problem, slow, chunked, close_after], logging_config=None)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None,
                            timeout_keep_alive=1, lifespan="off")
    srv = uvicorn.Server(config)
    task = asyncio.create_task(srv.serve())
    await eventually(lambda: srv.started, within=60, what="uvicorn to start")
    peers.clear()
    disconnects.clear()
    arrived.clear()
    yield port
    srv.should_exit = True
    await task


def transport(port: int, prefix: str = "") -> _Http11:
    t = _Http11.for_url(f"http://127.0.0.1:{port}{prefix}")
    assert t is not None
    return t


HEADERS = {"Authorization": "Bearer k", "Content-Type": "application/json"}


async def test_post_reuses_one_connection(server: int) -> None:
    t = transport(server)
    for i in range(20):
        status, reason, body = await t.post("/v1/echo", b'{"i":%d}' % i, HEADERS, 60)
        assert (status, reason, body) == (200, "OK", b'{"i":%d}' % i)
    assert len(set(peers)) == 1
    t.close()


async def test_problem_status_and_reason(server: int) -> None:
    t = transport(server)
    assert await t.post("/v1/problem", b"{}", HEADERS, 60) == (
        409, "Conflict", b'{"title":"Stale","status":409,"detail":"lost"}')
    assert (await t.post("/v1/echo", b"1", HEADERS, 60))[0] == 200
    assert len(set(peers)) == 1  # a 409 keeps the connection
    t.close()


async def test_server_closing_an_idle_connection_is_not_reused(server: int) -> None:
    t = transport(server)
    await t.post("/v1/echo", b"1", HEADERS, 60)
    # uvicorn's keep-alive timeout (1 s here) closes it; the transport sees the hang-up
    await eventually(lambda: not any(c.reusable for c in t._idle), within=60,
                     what="the server to close the idle connection")
    assert (await t.post("/v1/echo", b"2", HEADERS, 60))[2] == b"2"
    assert len(set(peers)) == 2
    t.close()


async def test_timeout_raises_read_timeout_and_hangs_up(server: int) -> None:
    t = transport(server)
    with pytest.raises(httpx.ReadTimeout):
        await t.post("/v1/slow", b"{}", HEADERS, 0.3)
    await eventually(lambda: disconnects == ["slow"], within=60,
                     what="the server to see the hang-up")
    assert (await t.post("/v1/echo", b"3", HEADERS, 60))[2] == b"3"
    t.close()


async def test_cancel_hangs_up(server: int) -> None:
    t = transport(server)
    task = asyncio.create_task(t.post("/v1/slow", b"{}", HEADERS, 30))
    await eventually(lambda: arrived == ["slow"], within=60, what="the request to arrive")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: disconnects == ["slow"], within=60,
                     what="the server to see the hang-up")
    t.close()


async def test_chunked_and_connection_close(server: int) -> None:
    t = transport(server)
    status, _, body = await t.post("/v1/chunked", b"{}", HEADERS, 60)
    assert status == 200 and body == b"".join(b'{"part":%d}' % i for i in range(5))
    assert (await t.post("/v1/close", b"{}", HEADERS, 60))[2] == b'{"ok":1}'
    assert not t._idle  # closed by the server's "connection: close"
    assert (await t.post("/v1/echo", b"4", HEADERS, 60))[2] == b"4"
    t.close()


async def test_large_bodies_and_concurrency(server: int) -> None:
    t = transport(server)
    big = b'"' + b"x" * (6 * 1024 * 1024) + b'"'
    assert (await t.post("/v1/echo", big, HEADERS, 30))[2] == big
    answers = await asyncio.gather(*(t.post("/v1/echo", b"%d" % i, HEADERS, 10)
                                     for i in range(50)))
    assert [a[2] for a in answers] == [b"%d" % i for i in range(50)]
    assert len(t._idle) == 20
    t.close()


async def test_prefix_and_headers(server: int) -> None:
    t = transport(server)
    status, _, _ = await t.post("/v1/echo", b"{}", {**HEADERS, "traceparent": "00-ab-cd-01"}, 5)
    assert status == 200
    with pytest.raises(httpx.LocalProtocolError):
        await t.post("/v1/echo", b"{}", {"x": "a\r\nb"}, 5)
    t2 = transport(server, "/v1/")
    assert (await t2.post("/echo", b"5", HEADERS, 60))[2] == b"5"
    t.close()
    t2.close()


async def test_connect_error() -> None:
    t = _Http11.for_url(f"http://127.0.0.1:{free_port()}")
    assert t is not None
    with pytest.raises(httpx.ConnectError):
        await t.post("/v1/echo", b"{}", HEADERS, 60)
    t.close()
    with pytest.raises(httpx.ConnectError):
        await t.post("/v1/echo", b"{}", HEADERS, 60)


async def raw_server(answer: bytes) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    return srv, srv.sockets[0].getsockname()[1]


async def test_close_delimited_body_and_truncated_answer() -> None:
    srv, port = await raw_server(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n"
                                 b'{"old":true}')
    t = transport(port)
    assert await t.post("/x", b"", HEADERS, 60) == (200, "OK", b'{"old":true}')
    srv.close()
    srv, port = await raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}")
    t = transport(port)
    with pytest.raises(httpx.RemoteProtocolError):
        await t.post("/x", b"", HEADERS, 60)
    srv.close()
    srv, port = await raw_server(b"garbage\r\n\r\n")
    t = transport(port)
    with pytest.raises(httpx.RemoteProtocolError):
        await t.post("/x", b"", HEADERS, 60)
    srv.close()


@pytest.mark.filterwarnings("ignore")
def test_for_url(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _Http11.for_url("https://g:8081") is None
    assert _Http11.for_url("http://u:p@g:8081") is None
    assert _Http11.for_url("http://g:8081/?a=1") is None
    assert _Http11.for_url("http://g:bad") is None
    assert _Http11.for_url("http://[::1]:8081") is not None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert _Http11.for_url("http://g:8081") is None
    monkeypatch.setenv("NO_PROXY", "g")
    assert _Http11.for_url("http://g:8081") is not None


@pytest.fixture(scope="session", params=["asyncio", "uvloop"])
def event_loop_policy(request: pytest.FixtureRequest) -> asyncio.AbstractEventLoopPolicy:
    import uvloop
    return uvloop.EventLoopPolicy() if request.param == "uvloop" else \
        asyncio.DefaultEventLoopPolicy()


async def test_informational_answer_is_skipped() -> None:
    srv, port = await raw_server(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
                                 b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    t = transport(port)
    assert await t.post("/x", b"", HEADERS, 60) == (200, "OK", b"{}")
    srv.close()
