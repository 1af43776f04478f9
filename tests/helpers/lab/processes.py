"""Processes of a fault scenario besides the cluster's own: `WorkerProc`, one
`tests/faults/worker_proc.py` worker (fenced, at-most-once effects in the test database) to
start, signal, freeze, kill and read the log of; a service restarted on its old port
(`respawn`); a scheduler process's shard-lease owner id; the shared servers' processes found by
their listening port (`server_pids`) and frozen with SIGSTOP for a while (`frozen`: SIGCONT on
leaving, whatever happens, and a detached watchdog that sends it even if this process dies)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.helpers.lab.cluster import ROOT, Cluster

__all__ = ["WORKER_SCRIPT", "WorkerProc", "children", "frozen", "listening_pid",
           "process_state", "respawn", "scheduler_owner", "server_pids", "server_port"]

WORKER_SCRIPT = ROOT / "tests" / "faults" / "worker_proc.py"


@dataclass
class WorkerProc:
    """One `worker_proc.py` process; its RunStarted events carry `worker:<name>`."""

    name: str
    gateway_url: str
    api_key: str
    effects_url: str
    log_dir: Path
    concurrency: int = 16
    grace_seconds: float = 0.0
    sleep_seconds: float = 0.0
    sleep_max_seconds: float = 0.0  # above sleep_seconds: each run sleeps a random time between
    claim_wait_seconds: float = 10.0
    pings: bool = True  # False: no liveness pings (an SDK before issue 39): only its lease ends it
    proc: subprocess.Popen[bytes] | None = None
    _log_offset: int = 0

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"worker-{self.name}.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> WorkerProc:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        env = {**os.environ, "OSTINATO_GATEWAY_URL": self.gateway_url,
               "OSTINATO_API_KEY": self.api_key, "OSTINATO_EFFECTS_DATABASE_URL": self.effects_url,
               "OSTINATO_WORKER_ID": self.name,
               "OSTINATO_WORKER_CONCURRENCY": str(self.concurrency),
               "OSTINATO_WORKER_GRACE_SECONDS": str(self.grace_seconds),
               "OSTINATO_WORKER_SLEEP_SECONDS": str(self.sleep_seconds),
               "OSTINATO_WORKER_SLEEP_MAX_SECONDS": str(self.sleep_max_seconds),
               "OSTINATO_WORKER_CLAIM_WAIT_SECONDS": str(self.claim_wait_seconds),
               "OSTINATO_WORKER_PINGS": "1" if self.pings else "0"}
        self.proc = subprocess.Popen([sys.executable, str(WORKER_SCRIPT)], cwd=ROOT, env=env,
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return self

    def wait_ready(self, seconds: float = 120) -> WorkerProc:
        deadline = time.monotonic() + seconds
        marker = f"worker_proc ready {self.name}".encode()
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(f"worker {self.name} exited: {self.tail()}")
            with self.log_path.open("rb") as f:
                f.seek(self._log_offset)
                if marker in f.read():
                    return self
            time.sleep(0.05)
        raise TimeoutError(f"worker {self.name} not ready: {self.tail()}")

    def send(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        """kill -9, reaped."""
        if self.alive:
            self.send(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 20) -> int | None:
        """Graceful stop (SIGCONT first: a frozen process cannot handle SIGTERM); -9 after
        `timeout`. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.send(signal.SIGCONT)
            self.send(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_mark(self) -> int:
        """Where the log ends now: pass it to `records(since=...)` to see only what follows."""
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def records(self, since: int = 0) -> list[dict[str, Any]]:
        """The structured log lines (one JSON object each) written from byte `since` on."""
        if not self.log_path.exists():
            return []
        with self.log_path.open("rb") as f:
            f.seek(since)
            lines = f.read().splitlines()
        found = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                found.append(record)
        return found


def respawn(cluster: Cluster, alias: str, service: str) -> None:
    """Start `service` again under `alias` on the port it had, so clients configured with its
    URL (workers and their gateway) find it again; `Cluster.spawn` would pick a new port."""
    port_var = {"api": "API", "worker_gateway": "GATEWAY"}.get(service, service.upper())
    env = {**cluster.env(), f"OSTINATO_{port_var}_PORT": str(cluster.ports[alias])}
    with (cluster.log_dir / f"{alias}.log").open("ab") as log:
        cluster.procs[alias] = subprocess.Popen(
            [sys.executable, "-m", f"services.{service}"], cwd=ROOT, env=env,
            stdout=log, stderr=subprocess.STDOUT)
    cluster.wait_ready(alias)


def scheduler_owner(cluster: Cluster, alias: str) -> str:
    """The shard-lease owner id of a scheduler process (`<hostname>-<pid>`)."""
    return f"{socket.gethostname()}-{cluster.procs[alias].pid}"


# -- the shared servers' processes (Linux /proc) -----------------------------------------------


def server_port(name: str) -> int:
    """The TCP port the shared `postgres` or `kafka` server listens on, from the environment
    the tests and benchmarks use (OSTINATO_DATABASE_URL or OSTINATO_PG_PORT, and
    OSTINATO_KAFKA_BOOTSTRAP), with infra/env.sh's defaults."""
    if name == "postgres":
        url = os.environ.get("OSTINATO_DATABASE_URL")
        port = urlsplit(url).port if url else None
        return port or int(os.environ.get("OSTINATO_PG_PORT", "15432"))
    if name == "kafka":
        first = os.environ.get("OSTINATO_KAFKA_BOOTSTRAP", "127.0.0.1:9092").split(",")[0]
        return int(first.rsplit(":", 1)[1])
    raise ValueError(f"unknown server {name!r} (postgres or kafka)")


def _ppid_and_state(pid: int) -> tuple[int, str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces
    return int(fields[1]), fields[0]


def process_state(pid: int) -> str | None:
    """The process's state letter (`T`: stopped by a signal), None if it is gone."""
    found = _ppid_and_state(pid)
    return None if found is None else found[1]


def children(pid: int) -> list[int]:
    """The direct children of a process."""
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            found = _ppid_and_state(int(entry.name))
            if found is not None and found[0] == pid:
                kids.append(int(entry.name))
    return sorted(kids)


def listening_pid(port: int) -> int | None:
    """The process listening on TCP `port` of this network namespace (the eldest, if several
    hold the socket), None if none is."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{cols[9]}]")
    holders = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            with suppress(OSError):
                if os.readlink(fd) in inodes:
                    holders.add(int(entry.name))
                    break
    eldest = [p for p in holders if (_ppid_and_state(p) or (0, ""))[0] not in holders]
    return min(eldest or holders, default=None)


def server_pids(name: str) -> list[int]:
    """The processes of the shared `postgres` (the postmaster first, then every server process
    it forked: backends, checkpointer, WAL writer, ...) or `kafka` server (the broker's JVM),
    found by the port it listens on. Raises if nothing listens there."""
    port = server_port(name)
    root = listening_pid(port)
    if root is None:
        raise RuntimeError(f"no process listens on 127.0.0.1:{port} ({name})")
    return [root, *children(root)]


_WATCHDOG = """
import os, signal, sys, time
time.sleep(float(sys.argv[1]))
root = int(sys.argv[2])
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            stat = open(f"/proc/{entry}/stat").read()
            if int(stat[stat.rindex(")") + 2:].split()[1]) == root:
                os.kill(int(entry), signal.SIGCONT)
        except (OSError, ValueError):
            pass
for pid in sys.argv[2:]:
    try:
        os.kill(int(pid), signal.SIGCONT)
    except OSError:
        pass
"""


@contextmanager
def frozen(name: str, *, max_seconds: float) -> Iterator[list[int]]:
    """SIGSTOP every process of the shared server `name` (`server_pids`) while the block runs;
    yields the pids stopped. The root process is stopped first, so it forks nothing new, then
    its children, looked up again until no new one appears. On leaving, whatever happens
    (an exception, a cancelled task, Ctrl-C), every one of them gets SIGCONT. A detached
    watchdog process sends SIGCONT after `max_seconds` too, should this process be killed
    before its `finally` runs: other users of the shared server must never find it frozen."""
    pids = server_pids(name)
    root = pids[0]
    watchdog = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(max_seconds), *map(str, pids)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)  # not in our process group: a Ctrl-C does not stop it
    stopped: list[int] = []
    try:
        os.kill(root, signal.SIGSTOP)
        stopped.append(root)
        while True:
            new = [p for p in children(root) if p not in stopped]
            if not new:
                break
            for pid in new:
                with suppress(ProcessLookupError):  # a backend that just exited
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
        yield list(stopped)
    finally:
        for pid in reversed(stopped):  # children first, the root last
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        watchdog.kill()
        watchdog.wait()
