"""End to end, fair dispatch: a noisy tenant submits 20,000 jobs, then a quiet tenant submits 20;
the quiet tenant's runs all start within a bound that does not grow with the noisy backlog.

Five services as processes over the real PostgreSQL and Kafka, one shared worker (admin key)
with few slots running a no-op task, so the noisy backlog builds up in the database. The bound
is structural, never a wall-clock time: from the log's global order (`events.seq`) we count the
noisy runs the dispatcher queued between the moment every quiet run was waiting and the last
quiet run being queued, and we show the noisy backlog at that moment was large.

The noisy backlog is not drained: the cluster is stopped with most of it still waiting.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
import pytest

from ostinato.eventlog.store import read_all_after
from ostinato.sdk import Worker, task
from tests.helpers.e2e import running_cluster
from tests.helpers.lab.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

NOISY_JOBS = 20_000
BATCH = 1_000  # jobs per POST /v1/jobs/batch (its maximum)
QUIET_JOBS = 20
SLOTS = 8  # the shared worker's concurrency: the slots of pool `default`
PREFETCH = 0.5  # OSTINATO_DISPATCH_PREFETCH: runs queued ahead of free slots
CAPACITY = 12  # ceil(SLOTS * (1 + PREFETCH)): the most runs queued or running at once
W_NOISY = W_QUIET = 1  # tenants' weights (the default)
MIN_BACKLOG = 10_000  # noisy runs still waiting when the quiet ones arrive, at least
# FAIRNESS.md's latency bound: the m-th quiet run (0-based) starts among the next
# m + 1 + (floor(m * w_noisy / w_quiet) + 1) dispatches of its queue, counted from the first
# decision that sees the quiet tenant, so before the last quiet run (m = QUIET_JOBS - 1) at most
# floor((QUIET_JOBS - 1) * w_noisy / w_quiet) + 1 noisy runs go, i.e. QUIET_JOBS * w_noisy /
# w_quiet with equal weights, whatever the noisy backlog.
SFQ_BOUND = (QUIET_JOBS - 1) * W_NOISY // W_QUIET + 1
# Counted from S (the seq of the last quiet `RunScheduled`), the log's order is not exactly the
# dispatcher's view: S is taken when the scheduler inserts the event, the quiet runs become
# visible when its transaction commits. Decisions in between see no quiet run and fill every
# free slot with noisy runs whose `RunQueued` seqs come after S: at most CAPACITY at once (the
# dispatcher never queues beyond the live workers' slots and its prefetch buffer), plus the
# slots the worker frees and the dispatcher refills before the commit. That transaction stays
# open for a few milliseconds after S, less than one cycle of a no-op run (claim, run, report,
# the next decision: about 100 ms here), so at most one more round of SLOTS: SLACK. Both terms
# are constants: neither grows with the backlog. (The test also checks the tight bound on its
# own, from the first decision that saw every quiet run, where no such allowance is needed.)
SLACK = SLOTS
BOUND = SFQ_BOUND + CAPACITY + SLACK


@pytest.fixture
async def cluster(template_db: str, topic_prefix: str,
                  tmp_path: Path) -> AsyncIterator[Cluster]:
    # Two instances of each (the e2e default): the bound below is the fair queue's for one
    # sequence of decisions with its memory (FairState) carried from round to round, which two
    # dispatchers taking turns are, since each round reads the memory the other one saved
    # (dispatch_fairness, docs/ARCHITECTURE.md §3).
    async with running_cluster(template_db, topic_prefix, tmp_path / "logs",
                               env={"OSTINATO_LOG_LEVEL": "warning",
                                    "OSTINATO_DISPATCH_PREFETCH": str(PREFETCH),
                                    "OSTINATO_SCHEDULER_BATCH_SIZE": "500"}) as c:
        yield c


@task("noop")
async def noop(payload: object) -> None:
    return None


async def new_tenant(api: httpx.AsyncClient, cluster: Cluster, name: str) -> tuple[uuid.UUID, str]:
    r = await api.post("/v1/tenants", json={"name": name},
                       headers={"Authorization": f"Bearer {cluster.admin_key}"})
    assert r.status_code == 201, r.text
    return uuid.UUID(r.json()["id"]), r.json()["api_key"]


async def submit(api: httpx.AsyncClient, key: str, prefix: str, n: int) -> None:
    for lo in range(0, n, BATCH):
        jobs = [{"name": f"{prefix}-{i}", "task": "noop"} for i in range(lo, min(n, lo + BATCH))]
        r = await api.post("/v1/jobs/batch", json={"jobs": jobs},
                           headers={"Authorization": f"Bearer {key}"}, timeout=120)
        assert r.status_code == 200, r.text


async def eventually(check: Callable[[], Awaitable[bool]], what: str, seconds: float) -> None:
    """Poll `check()` until true; the timeout only catches a hang, it is not the assertion."""
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.25)


@dataclass
class Dispatches:
    """The log's global order (`events.seq`) of each tenant's `RunScheduled` and `RunQueued`,
    the transaction that wrote each (its `xmin`: one for every run one decision queued, and for
    every run one scheduler transaction created), the run of each `RunQueued` and the
    `RunScheduled` of each run."""

    scheduled: dict[uuid.UUID, list[int]]
    queued: dict[uuid.UUID, list[int]]
    tx: dict[int, int] = field(default_factory=dict)
    run_at: dict[int, uuid.UUID] = field(default_factory=dict)
    scheduled_at: dict[uuid.UUID, int] = field(default_factory=dict)

    def created_by(self, run_id: uuid.UUID) -> int:
        """The transaction that created the run (wrote its `RunScheduled`)."""
        return self.tx[self.scheduled_at[run_id]]

    def decision_from(self, seq: int) -> int:
        """The first seq written by the transaction (a dispatcher's decision) that wrote `seq`."""
        return min(q for q, tx in self.tx.items() if tx == self.tx[seq])


async def run_load(cluster: Cluster,
                   conn: asyncpg.Connection) -> tuple[uuid.UUID, uuid.UUID, Dispatches]:
    """Submit the noisy then the quiet jobs, wait for the quiet runs, and read the log."""
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as api:
        noisy, noisy_key = await new_tenant(api, cluster, "noisy")
        quiet, quiet_key = await new_tenant(api, cluster, "quiet")
        worker = Worker(cluster.gateway_url, cluster.admin_key, [noop], concurrency=SLOTS,
                        claim_wait_seconds=1, shutdown_grace_seconds=5, capture_logs=False)
        running = asyncio.create_task(worker.run())
        try:
            await submit(api, noisy_key, "noisy", NOISY_JOBS)

            async def noisy_runs_created() -> bool:  # reading only; the scheduler writes
                n = await conn.fetchval("SELECT count(*) FROM runs WHERE tenant_id = $1", noisy)
                return n == NOISY_JOBS

            await eventually(noisy_runs_created, "the noisy runs to be created", 180)
            await submit(api, quiet_key, "quiet", QUIET_JOBS)

            async def quiet_runs_succeeded() -> bool:
                r = await api.get("/v1/runs?state=succeeded&limit=100",
                                  headers={"Authorization": f"Bearer {quiet_key}"})
                assert r.status_code == 200, r.text
                return len(r.json()["items"]) == QUIET_JOBS

            await eventually(quiet_runs_succeeded, "the quiet runs to succeed", 180)
        finally:
            await worker.stop()
            await running

    # The dispatches in the log's global order, through the project's own reader.
    log = Dispatches(scheduled={noisy: [], quiet: []}, queued={noisy: [], quiet: []})
    after = 0
    while page := await read_all_after(conn, after, 10_000):
        for e in page:
            if e.type == "RunScheduled":
                log.scheduled[e.tenant_id].append(e.seq)
                log.scheduled_at[e.stream_id] = e.seq
            elif e.type == "RunQueued":
                log.queued[e.tenant_id].append(e.seq)
                log.run_at[e.seq] = e.stream_id
        after = page[-1].seq
    # read after the events (the dispatcher is still queueing noisy runs): it holds them all
    log.tx = {r["seq"]: r["tx"] for r in await conn.fetch(
        "SELECT seq, xmin::text::bigint AS tx FROM events"
        " WHERE type IN ('RunScheduled', 'RunQueued')")}
    return noisy, quiet, log


async def test_a_quiet_tenant_starts_within_a_bound_whatever_the_noisy_backlog(
        cluster: Cluster) -> None:
    conn = await asyncpg.connect(cluster.database_url)
    try:
        noisy, quiet, log = await run_load(cluster, conn)
    finally:
        await conn.close()
    scheduled, queued = log.scheduled, log.queued

    assert len(scheduled[noisy]) == NOISY_JOBS and len(scheduled[quiet]) == QUIET_JOBS
    assert len(queued[quiet]) == QUIET_JOBS  # a no-op never fails: one dispatch per run
    s = max(scheduled[quiet])  # from here on every quiet run was waiting
    last = max(queued[quiet])  # the last quiet run dispatched
    backlog = (sum(1 for q in scheduled[noisy] if q < s) - sum(1 for q in queued[noisy] if q < s))
    noisy_between = sum(1 for q in queued[noisy] if s < q < last)
    # Two schedulers own different shards, so the quiet runs may be created in two transactions
    # and the first may go before the last are created (they only shorten what is left after
    # S). The tight bound counts from the first decision that saw every quiet run: for each
    # creating transaction, the first decision that admitted one of its runs proves it had
    # committed; the latest of those saw them all. No allowance for visibility is needed.
    first_admitted: dict[int, int] = {}
    for q in sorted(queued[quiet]):
        first_admitted.setdefault(log.created_by(log.run_at[q]), q)
    seen_from = log.decision_from(max(first_admitted.values()))
    noisy_seen = sum(1 for q in queued[noisy] if seen_from <= q < last)
    # The dispatch order from S ("|") to the last quiet run: n noisy, q quiet.
    order = "".join(x for _, x in sorted([(q, "n") for q in queued[noisy] if s < q < last]
                                         + [(q, "q") for q in queued[quiet]] + [(s, "|")]))
    print(f"\nnoisy backlog when the quiet runs arrived: {backlog}; noisy runs dispatched before "
          f"the last quiet one: {noisy_between} (bound {BOUND}), {noisy_seen} from the first "
          f"decision that saw them (bound {SFQ_BOUND}); noisy dispatched in all: "
          f"{len(queued[noisy])}; quiet runs created in {len(first_admitted)} transaction(s); "
          f"order {order}")
    assert backlog >= MIN_BACKLOG, f"the noisy backlog was only {backlog} runs"
    assert noisy_between <= BOUND, (
        f"{noisy_between} noisy runs were dispatched before the last of {QUIET_JOBS} quiet runs "
        f"(bound {BOUND} = {SFQ_BOUND} fair-queueing + {CAPACITY} capacity + {SLACK}); "
        f"order {order}")
    assert noisy_seen <= SFQ_BOUND, (
        f"{noisy_seen} noisy runs were dispatched from the first decision that saw the quiet "
        f"runs to the last of them (bound {SFQ_BOUND}); order {order}")
