"""The services' connection settings (`ostinato.db.pool.create_pool`), read back from the server."""

from __future__ import annotations

from ostinato.db.pool import create_pool


async def test_service_connections_never_jit_compile(pool) -> None:
    # A cached plan made on small tables can carry an estimate past jit_above_cost once they
    # grow; compiling it cost 200-480 ms of server CPU per execution of a 12 ms alert rule.
    async with pool.acquire() as conn:
        assert await conn.fetchval("SHOW jit") == "off"
        assert await conn.fetchval("SHOW plan_cache_mode") == "auto"


async def test_the_schedulers_custom_plans_keep_jit_off_too(db_url) -> None:
    scheduler_pool = await create_pool(db_url, max_size=1, custom_plans=True)
    try:
        async with scheduler_pool.acquire() as conn:
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
            assert await conn.fetchval("SHOW jit") == "off"
    finally:
        await scheduler_pool.close()
