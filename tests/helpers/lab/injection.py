"""Injecting faults: stopping and starting the shared PostgreSQL and Kafka servers
(`infra/<server>/<down|up>.sh`), and freezing a process (SIGSTOP) at a chosen moment relative to
its PostgreSQL transactions. Killing and signalling processes is on `Cluster` and
`processes.WorkerProc`."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.helpers.lab.cluster import ROOT
from tests.helpers.lab.database import Db

__all__ = ["freeze", "server"]


def server(name: str, action: str) -> float:
    """`infra/<postgres|kafka>/<down|up>.sh` (they stop/start the shared servers); returns the
    seconds it took. Raises if the script fails."""
    started = time.monotonic()
    script = ROOT / "infra" / name / f"{action}.sh"
    done = subprocess.run([str(script)], cwd=ROOT, capture_output=True, timeout=240, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed ({done.returncode}): "
                           f"{done.stdout.decode(errors='replace')[-1500:]}"
                           f"{done.stderr.decode(errors='replace')[-1500:]}")
    return time.monotonic() - started


def _tcp_ports(pid: int) -> set[int]:
    """Local TCP ports of a process's sockets (from /proc; Linux)."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[9] in inodes:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


async def freeze(db: Db, pid: int, *, in_transaction: bool = False,
                 last_query_like: str | None = None, attempts: int = 1000) -> int:
    """SIGSTOP a process at a moment it has no open PostgreSQL transaction, or, with
    `in_transaction`, one where it has (and, with `last_query_like`, whose last statement
    matches that LIKE pattern); it is woken and frozen again until so. Returns the attempts it
    took. Between transactions the freeze models a pause between writes; inside one, the
    process holds its row locks until idle_in_transaction_session_timeout."""
    for attempt in range(1, attempts + 1):
        os.kill(pid, signal.SIGSTOP)
        ports = await asyncio.to_thread(_tcp_ports, pid)
        open_txns = await db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY($1::int[]) "
            "AND xact_start IS NOT NULL AND query LIKE $2", sorted(ports),
            last_query_like or "%")
        if (open_txns > 0) == in_transaction:
            return attempt
        os.kill(pid, signal.SIGCONT)
        await asyncio.sleep(0.002 if in_transaction else 0.02)
    where = "inside" if in_transaction else "outside"
    raise RuntimeError(f"process {pid} was never {where} a transaction in {attempts} attempts")
