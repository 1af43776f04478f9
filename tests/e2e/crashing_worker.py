"""A worker process for the crash test: its handler records the run's effect in the test
database together with a dedupe row (`apply_once`), commits, and then — on the first attempt —
dies before it can report (os._exit), as a machine losing power would."""

from __future__ import annotations

import asyncio
import os
import sys

import asyncpg

from ostinato.sdk import Worker, apply_once, current, fence, task
from ostinato.sdk.effects import install


async def main(gateway: str, key: str, effects_url: str) -> None:
    db = await asyncpg.create_pool(effects_url, min_size=1, max_size=2)
    async with db.acquire() as conn:
        await install(conn)
        await conn.execute("CREATE TABLE IF NOT EXISTS charges (run_id text, attempt int)")

    @task("charge")
    async def charge(payload: dict) -> dict:
        ctx = current()
        async with db.acquire() as conn, conn.transaction():
            await fence(conn)
            applied = await apply_once(conn, name="charge")
            if applied:
                await conn.execute("INSERT INTO charges VALUES ($1, $2)", ctx.run_id,
                                   ctx.attempt)
        if ctx.attempt == 1:
            os._exit(17)  # crash after the effect committed, before reporting it
        return {"applied_now": applied}

    await Worker(gateway, key, [charge], concurrency=2, claim_wait_seconds=1,
                 shutdown_grace_seconds=2).run_until_signal()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
