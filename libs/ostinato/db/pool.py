"""asyncpg pool with JSON codecs and per-statement time limits."""

from __future__ import annotations

import collections
from typing import Any

import asyncpg
import asyncpg.protocol.protocol as _protocol
import msgspec

from ostinato.db.health import TrackedConnection

_json_encoder = msgspec.json.Encoder()

# The containers asyncpg may take as an array parameter: every sized iterable this code (or a
# caller) passes. asyncpg decides whether a value is an array, and whether each element of an
# array is itself one, with isinstance against collections.abc.Iterable and Sized, which runs
# ABCMeta.__instancecheck__ in Python for every element. An element of a uuid, text or int
# array cost 0.34 µs to encode with that check, 0.21 µs without (bench/README.md, issue 19);
# a run's statements pass about 200 elements. Against concrete types the check is a C loop.
# Strings, bytes and mappings are still never arrays (asyncpg tests those itself), and a tuple
# element is still a record.
ARRAY_CONTAINERS: tuple[type, ...] = (
    list, tuple, set, frozenset, range, collections.deque,
    type({}.keys()), type({}.values()), type({}.items()),
)


def use_concrete_array_checks() -> None:
    """Point asyncpg's array checks at ARRAY_CONTAINERS (idempotent; at import)."""
    _protocol.IterableABC = ARRAY_CONTAINERS  # type: ignore[attr-defined]
    _protocol.SizedABC = ARRAY_CONTAINERS  # type: ignore[attr-defined]


use_concrete_array_checks()


def _encode_json(value: Any) -> str:
    return _json_encoder.encode(value).decode()


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typename in ("json", "jsonb"):
        await conn.set_type_codec(
            typename, encoder=_encode_json, decoder=msgspec.json.decode, schema="pg_catalog"
        )


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Release without asyncpg's default reset query (advisory unlock, CLOSE ALL, UNLISTEN,
    RESET ALL): a round trip on every release, for session state this code never creates
    (locks are transaction-scoped, no LISTEN, no session SET). An open transaction is still
    rolled back by asyncpg before this runs. A connection that met a read-only server is
    closed instead (`TrackedConnection.read_only_seen`): kept, it would refuse every write
    after a failover; a new one finds the primary through the multi-host URL."""
    if getattr(conn, "read_only_seen", False):
        conn.terminate()  # the pool opens a new one on the next acquire


async def create_pool(
    dsn: str, *, min_size: int = 1, max_size: int = 10, statement_timeout_ms: int = 30_000,
) -> asyncpg.Pool:
    """Every service's pool. Plans are cached (plan_cache_mode auto): planning each execution
    cost the scheduler 0.1-0.25 ms of PostgreSQL per idle poll, five polls 20 times a second.
    The one statement whose generic plan is wrong, the due poll, asks for its own custom plan
    (`ostinato.stores.jobs.claim_due`). Its connections report refused writes (disk full,
    read-only) to `ostinato.db.health.WRITES`, which /readyz reads.

    `dsn` may name several servers, `postgresql://u@h1:p1,h2:p2/db?target_session_attrs=
    read-write` (asyncpg tries them in order and keeps the first that takes writes): the HA
    profile's primary and standby, either of which may be the primary after a failover
    (infra/README.md "HA PostgreSQL"). Connections to a node that died are lost and replaced;
    one to a node that became read-only is closed on release (`_keep_session`)."""
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        reset=_keep_session,
        connection_class=TrackedConnection,  # refused writes reach /readyz (ostinato.db.health)
        server_settings={
            "statement_timeout": str(statement_timeout_ms),
            "lock_timeout": "10000",
            "idle_in_transaction_session_timeout": "60000",
            "timezone": "UTC",
            # JIT compiles a query whose estimate passes jit_above_cost: 200-480 ms of server
            # CPU for an alert rule that runs in 12 ms once a plan made on small tables meets
            # large ones (auto_explain, bench/README.md). Nothing here is a long analytic scan.
            "jit": "off",
            # The hot tables and their indexes are in memory: a page read out of order costs
            # about what one in order does. At the default 4.0 the due poll read each shard's
            # jobs through jobs_next_due (every shard's entries, filtered: 16 x the rows) when
            # the heap happened to be in due order, rather than its shard's own index.
            "random_page_cost": "1.1",
        },
    )
    assert pool is not None
    return pool

