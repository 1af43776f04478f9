"""A fault scenario's HA PostgreSQL: pg_auto_failover's monitor, a primary and a synchronous
standby, started by `infra/postgres/ha-up.sh` on ports and a data folder of the scenario's own
(never the HA profile's defaults), asked who is primary, a node killed with -9 (its keeper and
its postgres: the machine lost), and stopped by `ha-down.sh`, its folder removed."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from tests.helpers.lab.cluster import ROOT

__all__ = ["HaPostgres", "Node", "free_low_ports"]

PRIMARY_STATES = ("single", "primary", "wait_primary")  # a node that takes writes


def free_low_ports(count: int) -> list[int]:
    """`count` distinct ports free now below Linux's ephemeral range (32768-), as the infra
    scripts require: a server's port there may be held by any outgoing connection."""
    with contextlib.ExitStack() as stack:
        found: list[int] = []
        while len(found) < count:
            port = random.randrange(20000, 32000)
            s = stack.enter_context(socket.socket())
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            found.append(port)
        return found


@dataclass(frozen=True)
class Node:
    name: str
    port: int
    reported: str  # the state its keeper last reported
    goal: str  # the state the monitor assigned it


@dataclass
class HaPostgres:
    base: Path
    monitor_port: int
    ports: tuple[int, int]

    @classmethod
    def on_free_ports(cls, base: Path) -> HaPostgres:
        monitor, a, b = free_low_ports(3)
        return cls(base=base, monitor_port=monitor, ports=(a, b))

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OSTINATO_PG_HA_")}
        env.update({"OSTINATO_PG_HA_MONITOR_PORT": str(self.monitor_port),
                    "OSTINATO_PG_HA_PORTS": ",".join(map(str, self.ports)),
                    "OSTINATO_PG_HA_DIR": str(self.base)})
        return env

    def url(self, role: str) -> str:
        """The multi-host URL a client of `role` uses: the writable node, wherever it is."""
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        return f"postgresql://{role}@{hosts}/ostinato?target_session_attrs=read-write"

    def _script(self, name: str, timeout: float) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([str(ROOT / "infra" / "postgres" / name)], cwd=ROOT,
                              env=self.env(), capture_output=True, timeout=timeout, check=False)

    def up(self) -> str:
        """ha-up.sh; returns its output. Raises with its output if it fails."""
        done = self._script("ha-up.sh", 400)
        out = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        if done.returncode != 0:
            raise RuntimeError(f"ha-up.sh failed ({done.returncode}): {out[-3000:]}")
        return out

    def down(self) -> None:
        """ha-down.sh, then the folder goes (a node killed earlier leaves its postgres to it)."""
        try:
            self._script("ha-down.sh", 200)
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    async def nodes(self) -> dict[str, Node]:
        """The nodes as the monitor (the failover manager) sees them."""
        conn = await asyncpg.connect(host="127.0.0.1", port=self.monitor_port,
                                     user="autoctl_node", database="pg_auto_failover")
        try:
            rows = await conn.fetch("SELECT nodename, nodeport, reportedstate::text AS r, "
                                    "goalstate::text AS g FROM pgautofailover.node")
        finally:
            await conn.close()
        return {r["nodename"]: Node(r["nodename"], r["nodeport"], r["r"], r["g"]) for r in rows}

    def keeper_pid(self, name: str) -> int | None:
        """The `pg_autoctl run` of node `name` (its session leader), if it runs."""
        marker = f"pg_autoctl run --pgdata {self.base / name}".encode()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if (entry / "cmdline").read_bytes().replace(b"\0", b" ").startswith(marker):
                        return int(entry.name)
        return None

    def kill(self, name: str) -> list[int]:
        """SIGKILL every process of node `name` (its keeper's session: the keeper's workers,
        postgres and its backends) until none is left; returns the pids."""
        session = self.keeper_pid(name)
        assert session is not None, f"node {name} is not running"
        killed: list[int] = []
        deadline = time.monotonic() + 30
        while pids := _in_session(session):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            killed += pids
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {name} still has processes {pids}")
            time.sleep(0.05)
        return killed


def _in_session(session: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[3]) == session and fields[0] != "Z":  # a zombie is dead already
                    pids.append(int(entry.name))
    return pids
