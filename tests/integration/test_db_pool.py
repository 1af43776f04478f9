"""The services' connection settings (`ostinato.db.pool.create_pool`), read back from the server."""

from __future__ import annotations

import abc
import collections
import uuid

import asyncpg
import pytest

from ostinato.db.health import WRITES
from ostinato.db.pool import create_pool


async def test_service_connections_never_jit_compile(pool) -> None:
    # A cached plan made on small tables can carry an estimate past jit_above_cost once they
    # grow; compiling it cost 200-480 ms of server CPU per execution of a 12 ms alert rule.
    async with pool.acquire() as conn:
        assert await conn.fetchval("SHOW jit") == "off"
        assert await conn.fetchval("SHOW plan_cache_mode") == "auto"


async def test_service_connections_price_a_page_out_of_order_as_in_memory(pool) -> None:
    # At 4.0 the due poll read every shard's entries through jobs_next_due, filtered, rather
    # than its shard's own index, when the heap lay in due order (test_scheduler_claims).
    async with pool.acquire() as conn:
        assert await conn.fetchval("SHOW random_page_cost") == "1.1"


async def test_array_elements_are_encoded_without_an_abc_check_each(pool, monkeypatch) -> None:
    # asyncpg asked collections.abc whether each element of an array was itself an array: a
    # Python-level ABCMeta.__instancecheck__ per element, a third of an element's encoding.
    calls = 0
    original = abc.ABCMeta.__instancecheck__

    def counting(cls: abc.ABCMeta, instance: object) -> bool:
        nonlocal calls
        calls += 1
        return original(cls, instance)

    monkeypatch.setattr(abc.ABCMeta, "__instancecheck__", counting)
    ids = [uuid.uuid4() for _ in range(1000)]
    async with pool.acquire() as conn:
        got = await conn.fetchval("SELECT array_agg(x) FROM unnest($1::uuid[], $2::text[]) "
                                  "AS t(x, y) WHERE y IS NOT NULL", ids, [str(i) for i in ids])
    assert got == ids
    assert calls < 10


async def test_every_builtin_container_is_still_an_array_and_nothing_else_is(pool) -> None:
    values = {"a": 1, "b": 2}
    async with pool.acquire() as conn:
        for container in ([1, 2], (1, 2), {1, 2}, frozenset({1, 2}), range(1, 3),
                          collections.deque([1, 2]), values.values()):
            assert sorted(await conn.fetchval("SELECT $1::int[]", container)) == [1, 2]
        assert await conn.fetchval("SELECT $1::text[]", ["ab", "cd"]) == ["ab", "cd"]
        assert await conn.fetchval("SELECT $1::int[]", [[1, 2], [3, 4]]) == [[1, 2], [3, 4]]
        for not_an_array in (values, "12", b"12", (i for i in (1, 2))):
            with pytest.raises((TypeError, asyncpg.DataError)):
                await conn.fetchval("SELECT $1::int[]", not_an_array)


async def test_a_connection_that_met_a_read_only_server_is_replaced_on_release(db_url) -> None:
    # After a failover a pooled connection may sit on a node that now refuses writes (25006);
    # kept, it would answer every request it serves with a 503. Closed on release, the next
    # one is opened by the multi-host URL's rule on the writable primary. Here the session
    # turns read-only on its own (the pool keeps session state: no RESET ALL on release).
    p = await create_pool(db_url, min_size=1, max_size=1)
    try:
        async with p.acquire() as conn:
            first = await conn.fetchval("SELECT pg_backend_pid()")
            await conn.execute("SET default_transaction_read_only = on")
            with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
                await conn.execute("CREATE TEMP TABLE t (x int)")
        async with p.acquire() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") != first
            assert await conn.fetchval("SHOW default_transaction_read_only") == "off"
        async with p.acquire() as conn:  # an ordinary one is kept, as before
            again = await conn.fetchval("SELECT pg_backend_pid()")
        async with p.acquire() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") == again
    finally:
        await p.close()
        WRITES.clear()  # the refusal was this test's own: /readyz of this process is not hit
