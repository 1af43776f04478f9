"""A fault scenario's client of the public API: a tenant, `fx` jobs (the fault worker's one
task, see `tests/faults/worker_proc.py`), batches retried with their idempotency keys through an
outage, and `Load`, a steady stream of them. Every call is retried while the api is unreachable,
so a job is either accepted (and must run) or reported as abandoned."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

__all__ = ["RETRY", "Load", "create_tenant", "fx_job", "submit", "submit_items"]

# The jobs' own policy: a fault may cost a run several attempts (lease expiries, the effects
# database restarting); it must never cost the run itself.
RETRY = {"max_attempts": 30, "initial_delay": "1s", "multiplier": 1.0, "max_delay": "1s"}


async def create_tenant(api_url: str, admin_key: str, name: str, within: float = 30) -> str:
    """A tenant's API key (retried while the api is not reachable)."""
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(base_url=api_url, timeout=10) as client:
        while True:
            try:
                r = await client.post("/v1/tenants", json={"name": name},
                                      headers={"Authorization": f"Bearer {admin_key}"})
                if r.status_code == 201:
                    return str(r.json()["api_key"])
                if r.status_code < 500:
                    raise RuntimeError(f"tenant refused: {r.status_code} {r.text[:300]}")
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("could not create a tenant")
            await asyncio.sleep(0.3)


def fx_job(key: str, *, schedule: Mapping[str, Any] | None = None, **payload: Any
           ) -> dict[str, Any]:
    """An `fx` job (see worker_proc.py for the payload) with a job idempotency key."""
    job: dict[str, Any] = {"name": key, "task": "fx", "idempotency_key": key,
                           "payload": payload, "retry": RETRY}
    if schedule is not None:
        job["schedule"] = dict(schedule)
    return job


async def submit(client: httpx.AsyncClient, jobs: Sequence[Mapping[str, Any]], *,
                 within: float = 60, on_error: Any = None) -> list[str]:
    """POST /v1/jobs/batch, retried with the same idempotency keys until accepted (an outage
    answers 5xx or not at all); returns the job ids. A 4xx is a bug: raised at once."""
    return [str(item["id"]) for item in await submit_items(client, jobs, within=within,
                                                            on_error=on_error)]


async def submit_items(client: httpx.AsyncClient, jobs: Sequence[Mapping[str, Any]], *,
                       within: float = 60, on_error: Any = None) -> list[dict[str, Any]]:
    """`submit`, returning the answer's items (`id`, `created`: False when an earlier attempt
    with the same key had already created the job, e.g. one whose answer an outage cut)."""
    deadline = time.monotonic() + within
    while True:
        try:
            r = await client.post("/v1/jobs/batch", json={"jobs": list(jobs)})
            if r.status_code == 200:
                return list(r.json()["items"])
            if r.status_code < 500:
                raise RuntimeError(f"batch refused: {r.status_code} {r.text[:500]}")
            error: Any = f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            error = exc
        if on_error is not None:
            on_error(error)
        if time.monotonic() > deadline:
            raise TimeoutError(f"batch not accepted within {within}s: {error!r}")
        await asyncio.sleep(0.3)


class Load:
    """`rate` jobs/s as batches of `batch` through POST /v1/jobs/batch. Each batch is retried
    with the same idempotency keys until the api accepts it, so a job is either accepted (and
    must run) or reported as abandoned; batches are not held back by a slow predecessor.
    `keep_alive=False` opens a connection a batch (a client that reconnects each time)."""

    def __init__(self, api_url: str, api_key: str, *, rate: float = 200.0, batch: int = 20,
                 payload: Mapping[str, Any] | None = None, give_up_after: float = 120.0,
                 max_in_flight: int = 32, keep_alive: bool = True) -> None:
        self.api_url = api_url
        self.keep_alive = keep_alive
        self.api_key = api_key
        self.rate = rate
        self.batch = batch
        self.payload = dict(payload or {})
        self.give_up_after = give_up_after
        self.prefix = f"load-{uuid.uuid4().hex[:6]}-"
        self.accepted: dict[str, str] = {}  # job idempotency key -> job id
        self.timeline: list[tuple[float, int]] = []  # (monotonic, accepted so far)
        self.failed_requests = 0
        self.errors: Counter[str] = Counter()  # "HTTP 503", or the exception's type: count
        # keys whose batch failed at least once and was then answered "already created": the
        # outage cut the answer to a commit that had happened (in doubt, resolved by the key)
        self.resolved_in_doubt: dict[str, str] = {}
        self.abandoned: list[str] = []
        self.sent = 0
        self._sem = asyncio.Semaphore(max_in_flight)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Load:
        self._task = asyncio.create_task(self._run(), name="load")
        return self

    async def stop(self) -> None:
        """Stop submitting; returns once every batch already made is accepted or abandoned."""
        self._stop.set()
        if self._task is not None:
            await self._task

    @property
    def job_ids(self) -> list[str]:
        return list(self.accepted.values())

    def _failed(self, error: Any) -> None:
        self.failed_requests += 1
        self.errors[error if isinstance(error, str) else type(error).__name__] += 1

    async def _send(self, client: httpx.AsyncClient, keys: list[str]) -> None:
        failed = 0

        def on_error(error: Any) -> None:
            nonlocal failed
            failed += 1
            self._failed(error)

        async with self._sem:
            jobs = [fx_job(k, **self.payload) for k in keys]
            try:
                items = await submit_items(client, jobs, within=self.give_up_after,
                                           on_error=on_error)
            except (TimeoutError, RuntimeError):
                self.abandoned += keys
                return
        ids = [str(item["id"]) for item in items]
        self.accepted.update(zip(keys, ids, strict=True))
        if failed:
            self.resolved_in_doubt.update(
                (k, str(item["id"])) for k, item in zip(keys, items, strict=True)
                if not item["created"])
        self.timeline.append((time.monotonic(), len(self.accepted)))

    async def _run(self) -> None:
        interval = self.batch / self.rate
        # without keep-alive every batch is a new connection: behind a balancer that hands each
        # new connection to the next instance, the batches alternate between the instances
        limits = httpx.Limits(max_connections=64,
                              max_keepalive_connections=None if self.keep_alive else 0)
        headers = {"Authorization": f"Bearer {self.api_key}"}
        pending: set[asyncio.Task[None]] = set()
        async with httpx.AsyncClient(base_url=self.api_url, timeout=10, limits=limits,
                                     headers=headers) as client:
            next_at = time.monotonic()
            while not self._stop.is_set():
                keys = [f"{self.prefix}{self.sent + i:07d}" for i in range(self.batch)]
                self.sent += self.batch
                t = asyncio.create_task(self._send(client, keys))
                pending.add(t)
                t.add_done_callback(pending.discard)
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    try:
                        await asyncio.wait_for(self._stop.wait(), delay)
                    except TimeoutError:
                        pass
            if pending:
                await asyncio.gather(*pending)
