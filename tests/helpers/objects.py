"""Object stores for tests (issue 38): always the REAL S3 server, never the local backend as
proof of object-store behaviour.

- `s3_store()`: an `ObjectStore` on the shared SeaweedFS that `make test` starts
  (`infra/up.sh s3`, OSTINATO_S3_* from infra/env.sh), under a prefix of the test's own
  (`tests/<hex>/`), emptied afterwards. tests/conftest.py's `object_store` fixture is this.
- `PrivateS3`: a SeaweedFS of the test's own (infra/s3/up.sh with its own folder and free
  ports), to stop, SIGSTOP or kill without touching the shared one (fault tests);
  tests/conftest.py's `private_s3` fixture starts one (`running_private_s3`) and stops it
  afterwards.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from urllib.parse import quote

import pytest

from ostinato.objects import ObjectStore, open_object_store

ROOT = Path(__file__).resolve().parents[2]
S3_ENDPOINT = os.environ.get("OSTINATO_S3_ENDPOINT", "http://127.0.0.1:18333")
S3_BUCKET = os.environ.get("OSTINATO_S3_BUCKET", "ostinato")
S3_ACCESS_KEY = os.environ.get("OSTINATO_S3_ACCESS_KEY", "ostinato")
S3_SECRET_KEY = os.environ.get("OSTINATO_S3_SECRET_KEY", "ostinato-local-secret")


def s3_url(prefix: str = "", *, endpoint: str = S3_ENDPOINT, bucket: str = S3_BUCKET,
           timeout: float | None = None) -> str:
    """The store URL of `bucket`/`prefix` on the local S3 server, with the tests' key."""
    query = (f"endpoint={quote(endpoint, safe=':/')}&access_key_id={quote(S3_ACCESS_KEY)}"
             f"&secret_access_key={quote(S3_SECRET_KEY, safe='')}")
    if timeout is not None:
        query += f"&timeout={timeout:g}"
    return f"s3://{bucket}/{quote(prefix.strip('/'))}?{query}"


def _port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1].rstrip("/"))


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


async def empty(store: ObjectStore, prefix: str = "") -> None:
    """Delete every object under `prefix`."""
    keys = [key async for key in store.list(prefix)]
    for start in range(0, len(keys), 64):
        await asyncio.gather(*(store.delete(k) for k in keys[start:start + 64]))


@asynccontextmanager
async def s3_store(prefix: str | None = None, *, request_timeout: float | None = None
                   ) -> AsyncIterator[ObjectStore]:
    """An ObjectStore on the shared real S3 server under `prefix` (default: a new
    `tests/<hex>`), emptied and closed afterwards."""
    if not _listening(_port_of(S3_ENDPOINT)):
        pytest.fail(f"no S3 server on {S3_ENDPOINT}: start it with `infra/up.sh s3` "
                    "(`make test` does)")
    store = open_object_store(s3_url(prefix or f"tests/{uuid.uuid4().hex}",
                                     timeout=request_timeout))
    try:
        yield store
    finally:
        with suppress(Exception):  # the test's own faults may have left the store unusable
            await empty(store)
        await store.close()


def _free_port_block() -> int:
    """An S3 port P for a private instance: P-3..P and each + 10000 free, all under 32768."""
    for _ in range(200):
        port = random.randrange(19_003, 22_700)
        ports = [p + off for p in range(port - 3, port + 1) for off in (0, 10_000)]
        if not any(_listening(p) for p in ports) and all(_bindable(p) for p in ports):
            return port
    raise RuntimeError("no free block of ports for a private S3 server")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class PrivateS3:
    """A SeaweedFS of one test's own: its folder and ports, started and stopped by the
    project's scripts (infra/s3/up.sh, down.sh), paused with SIGSTOP and resumed with SIGCONT."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        self.folder = folder
        self.port = port or _free_port_block()
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(OSTINATO_S3_DIR=str(self.folder), OSTINATO_S3_PORT=str(self.port),
                   OSTINATO_S3_ENDPOINT=self.endpoint, OSTINATO_S3_BUCKET=S3_BUCKET,
                   OSTINATO_S3_ACCESS_KEY=S3_ACCESS_KEY, OSTINATO_S3_SECRET_KEY=S3_SECRET_KEY)
        env.pop("OSTINATO_S3_URL", None)
        return env

    async def _script(self, name: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            "bash", str(ROOT / "infra" / "s3" / name), env=self._env(),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"infra/s3/{name} for {self.folder} failed:\n{out.decode()}")

    async def start(self) -> None:
        await self._script("up.sh")

    async def stop(self) -> None:
        """SIGTERM (SIGKILL after 20 s) through infra/s3/down.sh; a paused server is resumed
        first so that it can stop."""
        self.resume()
        await self._script("down.sh")

    @property
    def pid(self) -> int | None:
        try:
            return int((self.folder / "weed.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def pause(self) -> None:
        """SIGSTOP: the port still accepts connections (the kernel's backlog), nothing answers."""
        assert self.pid is not None, "the private S3 server is not running"
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.pid is not None:
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)

    def url(self, prefix: str = "", *, bucket: str = S3_BUCKET,
            timeout: float | None = None) -> str:
        return s3_url(prefix, endpoint=self.endpoint, bucket=bucket, timeout=timeout)

    def store(self, prefix: str = "", *, bucket: str = S3_BUCKET,
              timeout: float | None = None) -> ObjectStore:
        return open_object_store(self.url(prefix, bucket=bucket, timeout=timeout))


@asynccontextmanager
async def running_private_s3(folder: Path) -> AsyncIterator[PrivateS3]:
    """A started PrivateS3 in `folder`, stopped afterwards (also when paused)."""
    server = PrivateS3(folder)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
