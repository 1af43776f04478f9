"""A worker for the mixed-version test, written against the SDK surface every release since the
previous one keeps (`Worker`, `task`, `workflow`, `current`, `ctx.step`, `ctx.sleep`,
`ctx.wait_for_signal`), so that the same file runs on main's SDK and, with the previous
release's tree first on PYTHONPATH, on its SDK.

    OSTINATO_GATEWAY_URL=... OSTINATO_API_KEY=... COMPAT_EFFECTS_URL=... \\
    COMPAT_WORKER_ID=old COMPAT_POOL=old python tests/compat/worker.py

Tasks: `fx` (one effect) and `flow` (step `a`, a durable timer of `payload.timer` seconds,
step `b`, a wait for signal `go`, step `c` with the signal's payload). Every effect is a row
of `compat_effects` (no unique key: a duplicate is visible, not an error). It prints the file
its SDK came from, so the test can tell which release it runs.
"""

from __future__ import annotations

import asyncio
import os
import sys

import asyncpg

import ostinato.sdk
from ostinato.sdk import Worker, WorkflowContext, current, task, workflow

DDL = """
CREATE TABLE IF NOT EXISTS compat_effects (
    run_id     uuid        NOT NULL,
    what       text        NOT NULL,
    attempt    int         NOT NULL,
    worker_id  text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""


async def amain() -> None:
    worker_id = os.environ["COMPAT_WORKER_ID"]
    pool = await asyncpg.create_pool(os.environ["COMPAT_EFFECTS_URL"], min_size=1, max_size=4)
    async with pool.acquire() as conn, conn.transaction():
        # The two workers start at once: CREATE TABLE IF NOT EXISTS racing itself can fail on
        # pg_type's unique index, so one creates the table while the other waits its turn.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('compat_effects'))")
        await conn.execute(DDL)

    async def effect(what: str) -> str:
        ctx = current()
        await pool.execute("INSERT INTO compat_effects (run_id, what, attempt, worker_id)"
                           " VALUES ($1, $2, $3, $4)", ctx.run_id, what, ctx.attempt, worker_id)
        return what

    @task("fx")
    async def fx(payload: object) -> dict[str, object]:
        await effect("fx")
        return {"worker": worker_id}

    @workflow("flow")
    async def flow(ctx: WorkflowContext, payload: object) -> dict[str, object]:
        p = payload if isinstance(payload, dict) else {}
        await ctx.step("a", effect, "a")
        await ctx.sleep(float(p.get("timer", 1)))
        await ctx.step("b", effect, "b")
        got = await ctx.wait_for_signal("go")
        await ctx.step("c", effect, f"c:{got}")
        return {"worker": worker_id, "signal": got}

    worker = Worker(os.environ["OSTINATO_GATEWAY_URL"], os.environ["OSTINATO_API_KEY"],
                    [fx, flow], pools=[os.environ.get("COMPAT_POOL", "default")],
                    worker_id=worker_id, concurrency=8, claim_wait_seconds=1,
                    shutdown_grace_seconds=5, capture_logs=False)
    print(f"compat worker {worker_id} sdk={ostinato.sdk.__file__}", flush=True)
    try:
        await worker.run_until_signal()
    finally:
        await pool.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(amain()))
