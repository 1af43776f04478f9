"""A database outage of a moment for one test, without stopping the shared PostgreSQL: a TCP
relay in front of the real server that the test cuts and mends. `cut()` ends the server side of
every relayed connection with `pg_terminate_backend` (the FATAL 57P01 a restart sends reaches the
client; connections not made through the relay, the test's own, are left alone) and stops
listening, so new connections are refused; `mend()` listens again on the same
port. What the client sees is what a restart or a crash of a second looks like to it."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit

import asyncpg

__all__ = ["PgRelay"]


class PgRelay:
    """Relays 127.0.0.1:`port` to the server of `url`; `url_through(url)` is `url` via it."""

    def __init__(self, admin_url: str) -> None:
        parts = urlsplit(admin_url)
        self.admin_url = admin_url
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._upstream_ports: set[int] = set()  # the server's client_port of each relayed one
        self.port = 0
        self.cuts = 0

    async def start(self) -> PgRelay:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def url_through(self, url: str) -> str:
        parts = urlsplit(url)
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{self.port}" if auth else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    async def cut(self) -> int:
        """Refuse new connections and end every relayed one's backend (as a server shutting
        down does); returns how many backends were ended."""
        self.cuts += 1
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        admin = await asyncpg.connect(self.admin_url)
        try:
            ended = await admin.fetchval(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE client_port = ANY($1::int[]) AND pid <> pg_backend_pid()",
                sorted(self._upstream_ports))
        finally:
            await admin.close()
        for writer in list(self._writers):  # what the server has not closed yet
            writer.close()
        return int(ended or 0)

    async def mend(self) -> None:
        """Accept connections again, on the same port."""
        if self._server is None:
            await self.start()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        port = up_writer.get_extra_info("sockname")[1]
        self._upstream_ports.add(port)
        self._writers |= {writer, up_writer}
        pumps = [asyncio.create_task(self._pump(reader, up_writer)),
                 asyncio.create_task(self._pump(up_reader, writer))]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
            for w in (writer, up_writer):
                w.close()
                self._writers.discard(w)
            self._tasks.difference_update(pumps)
            self._upstream_ports.discard(port)

    @staticmethod
    async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
