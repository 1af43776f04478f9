"""A TCP load balancer in front of a service's instances, as a platform puts a Service or an L4
balancer in front of its replicas: clients are given one address and reach either instance.
Each new connection goes to the next backend in turn; a backend that refuses (killed, not
started yet) is skipped, so a client whose connection died reconnects to a live instance.
It runs as a process of its own (`Balancer.start()`), so the harness's event loop never sits
between a worker and its gateway.

    python -m tests.helpers.lab.balancer --listen 40001 --backends 40002,40003
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

__all__ = ["Balancer"]

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class Balancer:
    """The balancer process for `backends` (ports on 127.0.0.1), listening on `port`."""

    port: int
    backends: Sequence[int]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Balancer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.helpers.lab.balancer", "--listen", str(self.port),
                 "--backends", ",".join(map(str, self.backends))],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:  # listening: any answer (even "no backend") proves it
            if self.proc.poll() is not None:
                raise RuntimeError(f"balancer exited: {self.log_path.read_text()[-500:]}")
            try:
                httpx.get(f"{self.url}/healthz", timeout=2)
                return self
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()
    except (OSError, RuntimeError):
        dst.close()


async def serve(listen: int, backends: list[int]) -> None:
    turn = itertools.cycle(range(len(backends)))
    open_tasks: set[asyncio.Task[None]] = set()  # held: a pending task only weakly referenced
    # by its stream protocol may be collected mid-connection

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            open_tasks.add(task)
            task.add_done_callback(open_tasks.discard)
        start = next(turn)
        upstream: asyncio.StreamWriter | None = None
        try:
            for i in range(len(backends)):
                port = backends[(start + i) % len(backends)]
                with contextlib.suppress(OSError):
                    up_reader, upstream = await asyncio.open_connection("127.0.0.1", port)
                    break
            if upstream is None:  # no instance listens: the client sees a closed connection
                return
            await asyncio.gather(_pump(reader, upstream), _pump(up_reader, writer))
        finally:
            for w in (writer, upstream):
                if w is not None:
                    w.close()

    server = await asyncio.start_server(accept, "127.0.0.1", listen, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", type=int, required=True)
    parser.add_argument("--backends", required=True, help="comma-separated ports")
    args = parser.parse_args()
    backends = [int(p) for p in args.backends.split(",") if p]
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.listen, backends))


if __name__ == "__main__":
    main()
