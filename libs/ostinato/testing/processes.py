"""Processes of a fault scenario besides the cluster's own: `WorkerProc`, one
`tests/faults/worker_proc.py` worker (fenced, at-most-once effects in the test database) to
start, signal, freeze, kill and read the log of; a service restarted on its old port
(`respawn`); a scheduler process's shard-lease owner id."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ostinato.testing.cluster import ROOT, Cluster

__all__ = ["WORKER_SCRIPT", "WorkerProc", "respawn", "scheduler_owner"]

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
    claim_wait_seconds: float = 10.0
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
               "OSTINATO_WORKER_CLAIM_WAIT_SECONDS": str(self.claim_wait_seconds)}
        self.proc = subprocess.Popen([sys.executable, str(WORKER_SCRIPT)], cwd=ROOT, env=env,
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return self

    def wait_ready(self, seconds: float = 30) -> WorkerProc:
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
