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

from tests.helpers.lab.cluster import ROOT, free_port

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
        # (the server answers a moment before `pg_ctl start -w` returns and the line is written)
        while "postgres restarted" not in (text := (server.base / "supervisor.log").read_text()):
            assert time.monotonic() < deadline, text
            time.sleep(0.1)
        assert "postgres is not running" in text
    finally:
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=10) == 0
        log.close()
    assert "stopping" in (server.base / "supervisor.log").read_text()


@pytest.fixture
def checkout() -> Iterator[Path]:
    """A throwaway checkout's infra scripts for PostgreSQL: its own data folder (.cache/pg)
    and, given to the scripts, its own port; never the shared server."""
    if not (PGBIN / "initdb").exists():
        pytest.skip(f"no PostgreSQL binaries in {PGBIN}")
    root = Path(tempfile.mkdtemp(prefix="ostinato-checkout-", dir="/tmp"))
    root.chmod(0o755)
    for name in ("env.sh", "lib.sh", "postgres/common.sh", "postgres/up.sh",
                 "postgres/down.sh", "postgres/supervise.sh"):
        (root / "infra" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "infra" / name, root / "infra" / name)
    try:
        yield root
    finally:
        subprocess.run([str(root / "infra" / "postgres" / "down.sh")], env=_env(root, 0),
                       capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


def _env(root: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSTINATO_")}
    env.update({"OSTINATO_PG_SUPERVISE_SECONDS": "0.5", "OSTINATO_CACHE": str(root / ".c")})
    if port:
        env["OSTINATO_PG_PORT"] = str(port)
    return env


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] not in "ZX"
    except (OSError, IndexError):
        return False


def test_up_starts_the_supervisor_and_down_stops_it_before_the_server(checkout: Path) -> None:
    port = free_port()
    env = _env(checkout, port)
    up = subprocess.run([str(checkout / "infra" / "postgres" / "up.sh")], env=env,
                        capture_output=True, text=True, check=True).stdout
    assert "postgres supervisor started" in up
    base = checkout / ".cache" / "pg"
    supervisor = int((base / "supervisor.pid").read_text())
    assert _alive(supervisor)
    # Its command line names this checkout's data folder (read until the exec has finished:
    # right after the fork it may still be empty or nohup's).
    cmdline, deadline = "", time.monotonic() + 60  # a give-up, not a bound
    while f"supervise.sh {base / 'data'} " not in cmdline:
        assert time.monotonic() < deadline, cmdline
        cmdline = Path(f"/proc/{supervisor}/cmdline").read_text().replace("\0", " ")
        time.sleep(0.05)
    # up.sh again: the same supervisor, not a second one.
    again = subprocess.run([str(checkout / "infra" / "postgres" / "up.sh")], env=env,
                           capture_output=True, text=True, check=True).stdout
    assert f"postgres supervisor running (pid {supervisor})" in again

    server = Throwaway.__new__(Throwaway)
    server.data, server.port = base / "data", port
    before = server.postmaster()
    assert before is not None
    os.kill(before, signal.SIGKILL)
    deadline = time.monotonic() + 120  # a give-up, not a bound
    while serving_postmaster(server) in (None, before):
        assert time.monotonic() < deadline, (base / "log" / "supervisor.log").read_text()
        time.sleep(0.3)

    down = subprocess.run([str(checkout / "infra" / "postgres" / "down.sh")], env=env,
                          capture_output=True, text=True, check=True).stdout
    assert down.index("postgres supervisor stopped") < down.index("stopping postgres (data")
    assert not _alive(supervisor)  # nothing is left to start the stopped server again
    assert server.postmaster() is None
