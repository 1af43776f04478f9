"""One fault scenario's lab: a `Cluster` (the five services as processes on a fresh database and
topic prefix) with the fault suite's short leases (`FAULT_ENV`), the test database (`Db`), a
tenant, worker processes started on demand, and the shared servers a scenario stopped; `close()`
stops every process it started and starts those servers again."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.helpers.lab.cluster import SERVICES, Cluster
from tests.helpers.lab.database import Db
from tests.helpers.lab.injection import server
from tests.helpers.lab.load import create_tenant, submit
from tests.helpers.lab.processes import WorkerProc

__all__ = ["FAULT_ENV", "Lab"]

# Short leases so that faults resolve within seconds.
FAULT_ENV = {
    "OSTINATO_LEASE_TTL_SECONDS": "3",
    "OSTINATO_SHARD_LEASE_TTL_SECONDS": "3",
    "OSTINATO_RECONCILE_INTERVAL_SECONDS": "0.5",
    "OSTINATO_SCHEDULER_POLL_SECONDS": "0.05",
    "OSTINATO_MISSED_GRACE_SECONDS": "15",
    "OSTINATO_STUCK_AFTER_SECONDS": "10",
    "OSTINATO_REPUBLISH_AFTER_SECONDS": "10",
}


@dataclass
class Lab:
    """A `Cluster` plus what a fault scenario needs around it; `close()` stops every process
    it started and restarts the shared servers a scenario stopped."""

    cluster: Cluster
    db: Db
    api_key: str = ""
    workers: dict[str, WorkerProc] = field(default_factory=dict)
    stopped_servers: set[str] = field(default_factory=set)
    effects_url: str = ""  # the workers' own database (default: the services')

    async def start(self, services: tuple[str, ...] = SERVICES, tenant: str = "faults", *,
                    env: Mapping[str, str] | None = None) -> None:
        """Start `services` (with `env` over the cluster's environment, e.g. a longer lease)
        and, with the api, create the tenant whose key the workers use."""
        self.cluster.extra_env.update(env or {})
        await asyncio.to_thread(self.cluster.start, services)
        if "api" in services:
            self.api_key = await create_tenant(self.cluster.api_url, self.cluster.admin_key,
                                               tenant)

    async def worker(self, name: str, **options: Any) -> WorkerProc:
        """Start a worker process and wait until it takes work."""
        w = WorkerProc(name, self.cluster.gateway_url, self.api_key,
                       self.effects_url or self.cluster.database_url, self.cluster.log_dir,
                       **options)
        self.workers[name] = w
        await asyncio.to_thread(lambda: w.start().wait_ready())
        return w

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.cluster.api_url, timeout=10,
                                 headers={"Authorization": f"Bearer {self.api_key}"})

    async def submit(self, jobs: Sequence[Mapping[str, Any]]) -> list[str]:
        async with self.client() as client:
            return await submit(client, jobs)

    async def server_down(self, name: str) -> float:
        self.stopped_servers.add(name)
        return await asyncio.to_thread(server, name, "down")

    async def server_up(self, name: str) -> float:
        seconds = await asyncio.to_thread(server, name, "up")
        self.stopped_servers.discard(name)
        return seconds

    def alive(self) -> dict[str, bool]:
        return {name: p.poll() is None for name, p in self.cluster.procs.items()}

    async def close(self) -> dict[str, int]:
        """Workers first (they need the gateway to release), then servers back, then the
        services. Returns the services' exit codes."""
        for w in self.workers.values():
            await asyncio.to_thread(w.stop)
        errors = []
        for name in sorted(self.stopped_servers):
            try:
                await self.server_up(name)
            except Exception as exc:  # keep stopping the rest; report at the end
                errors.append(exc)
        codes = await asyncio.to_thread(self.cluster.stop)
        await self.db.close()
        if errors:
            raise errors[0]
        return codes
