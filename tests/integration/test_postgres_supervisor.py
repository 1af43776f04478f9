"""infra/postgres/supervise.sh starts a PostgreSQL that stopped (issue 42: after its disk filled,
the server stopped and needed a manual start). A throwaway server of the test's own, on its own
port and data folder (never the shared one), is killed with kill -9 under the supervisor, and
serves again under a new postmaster; the supervisor logs the restart and exits on SIGTERM (as
infra/postgres/down.sh stops it before the server)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from ostinato.testing.cluster import ROOT, free_port

pytestmark = pytest.mark.integration
PGBIN = Path(f"/usr/lib/postgresql/{os.environ.get('OSTINATO_PG_MAJOR', '15')}/bin")
SUPERVISOR = ROOT / "infra" / "postgres" / "supervise.sh"


def as_pg(*cmd: str) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run `cmd` as the postgres OS user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.getuid() == 0 else list(cmd)


class Throwaway:
    def __init__(self) -> None:
        # Under /tmp (not pytest's 0700 tmp_path), so the postgres OS user can reach it.
        self.base = Path(tempfile.mkdtemp(prefix="ostinato-supervise-", dir="/tmp"))
        self.base.chmod(0o755)
        self.data, self.run = self.base / "data", self.base / "run"
        self.logfile = self.base / "postgres.log"
        self.port = free_port()
        self.run.mkdir()
        self.logfile.touch()
        if os.getuid() == 0:
            shutil.chown(self.base, "postgres", "postgres")
            shutil.chown(self.run, "postgres", "postgres")
            shutil.chown(self.logfile, "postgres", "postgres")

    def init_and_start(self) -> None:
        subprocess.run(as_pg(str(PGBIN / "initdb"), "-D", str(self.data), "--username=postgres",
                             "--auth=trust", "--encoding=UTF8", "--locale=C"),
                       check=True, capture_output=True, cwd="/")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.run}'\nmax_connections = 20\n"
                       "shared_buffers = 16MB\n")
        subprocess.run(as_pg(str(PGBIN / "pg_ctl"), "-D", str(self.data), "-l",
                             str(self.logfile), "-w", "-t", "60", "-s", "start"),
                       check=True, cwd="/")

    def postmaster(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(as_pg(str(PGBIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                                 "-w", "-s", "stop"), cwd="/", check=False)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[Throwaway]:
    if not (PGBIN / "initdb").exists():
        pytest.skip(f"no PostgreSQL binaries in {PGBIN}")
    pg = Throwaway()
    try:
        pg.init_and_start()
        yield pg
    finally:
        pg.stop()


async def _serving_pid(port: int) -> int | None:
    try:
        conn = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres",
                                     timeout=2)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return None
    try:
        return int(await conn.fetchval("SELECT pid FROM pg_stat_activity "
                                       "WHERE backend_type = 'checkpointer'") or 0) or None
    finally:
        await conn.close()


def serving_postmaster(server: Throwaway) -> int | None:
    """The postmaster serving the port (the parent of its checkpointer), or None."""
    child = asyncio.run(_serving_pid(server.port))
    if child is None:
        return None
    return int(Path(f"/proc/{child}/stat").read_text().split(") ")[1].split()[1])


def test_a_killed_postgres_is_started_again_by_the_supervisor(server: Throwaway) -> None:
    before = server.postmaster()
    assert before is not None and serving_postmaster(server) == before
    log = (server.base / "supervisor.log").open("ab")
    supervisor = subprocess.Popen(
        [str(SUPERVISOR), str(server.data), str(server.logfile), str(server.port)],
        env={**os.environ, "OSTINATO_PG_SUPERVISE_SECONDS": "0.5"}, stdout=log,
        stderr=subprocess.STDOUT)
    try:
        os.kill(before, signal.SIGKILL)
        deadline = time.monotonic() + 120  # a give-up, not a bound
        while (now := serving_postmaster(server)) in (None, before):
            assert supervisor.poll() is None, (server.base / "supervisor.log").read_text()
            assert time.monotonic() < deadline, (server.base / "supervisor.log").read_text()
            time.sleep(0.3)
        assert now == server.postmaster() != before
        text = (server.base / "supervisor.log").read_text()
        assert "postgres is not running" in text and "postgres restarted" in text
    finally:
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=10) == 0
        log.close()
    assert "stopping" in (server.base / "supervisor.log").read_text()
