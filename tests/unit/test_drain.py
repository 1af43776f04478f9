"""The drain of an HTTP service at SIGTERM (issue 39, `ostinato.runtime.ops.Drain`): /readyz
turns 503 at once, new requests get a 503 problem with Retry-After and Connection: close, the
ones in flight finish, and only then does the port close. Checked on a real uvicorn server in
this process (`HttpServer`), ordered by events, never by elapsed time."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from litestar import Litestar, get

from ostinato.runtime.ops import HttpServer, ops_route_handlers


def slow_app(release: asyncio.Event, entered: asyncio.Event) -> Litestar:
    async def ready() -> dict[str, Any]:
        return {}

    @get("/slow")
    async def slow() -> dict[str, str]:
        entered.set()
        await release.wait()
        return {"done": "yes"}

    @get("/fast")
    async def fast() -> dict[str, str]:
        return {"done": "yes"}

    return Litestar([slow, fast, *ops_route_handlers(ready)], logging_config=None)


async def test_a_draining_server_refuses_new_requests_and_finishes_those_in_flight() -> None:
    release, entered = asyncio.Event(), asyncio.Event()
    server = HttpServer(slow_app(release, entered), "127.0.0.1", 0)
    await server.start()
    url = f"http://127.0.0.1:{server.port}"
    async with httpx.AsyncClient(base_url=url) as client, \
            httpx.AsyncClient(base_url=url) as other:
        assert (await client.get("/readyz")).status_code == 200
        in_flight = asyncio.ensure_future(client.get("/slow"))
        await entered.wait()

        server.drain.begin()  # what SIGTERM starts (`HttpServer.stop`)
        ready = await other.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"] == {"draining": False}
        assert (await other.get("/livez")).status_code == 200  # alive: no restart by liveness
        refused = await other.get("/fast")
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert refused.headers["connection"] == "close"  # the retry goes on a new connection
        assert refused.headers["content-type"] == "application/problem+json"
        problem = refused.json()
        assert problem["type"].endswith("/service-unavailable") and problem["status"] == 503
        assert server.drain.refused == 1 and server.drain.in_flight == 1

        stopping = asyncio.ensure_future(server.stop())
        for _ in range(20):  # stop() waits for the request in flight, however long
            await asyncio.sleep(0.02)
        assert not stopping.done() and not in_flight.done()
        release.set()
        answer = await in_flight
        assert answer.status_code == 200 and answer.json() == {"done": "yes"}
        assert answer.headers["connection"] == "close"
        await stopping
    assert not server.started
    async with httpx.AsyncClient(base_url=url) as late:  # the port is closed afterwards
        try:
            await late.get("/fast")
            raise AssertionError("a stopped server answered")
        except httpx.ConnectError:
            pass


async def test_a_server_stopped_with_nothing_in_flight_stops_after_its_drain() -> None:
    server = HttpServer(slow_app(asyncio.Event(), asyncio.Event()), "127.0.0.1", 0,
                        drain_seconds=2.0)
    await server.start()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
        assert (await client.get("/fast")).status_code == 200
        stopping = asyncio.ensure_future(server.stop())
        while (await client.get("/readyz")).status_code == 200:  # until stop() begins
            pass
        refused = await client.get("/fast")  # within the drain period: refused, not reset
        assert refused.status_code == 503
        await stopping
    assert not server.started and server.drain.refused == 1
