"""Reading the transactional outbox as a consumer would, without Kafka: tests that drive the
library code of the services in-process take the messages an append queued for one topic and
hand them to the next step (the relay is tested on its own, against the real broker)."""

from __future__ import annotations

import asyncpg
import msgspec

from ostinato.bus.codec import decode
from ostinato.bus.consumer import Delivered
from ostinato.stores.rows import many

__all__ = ["drain_outbox"]

# The waiting rows, read without locking or deleting them (the relay takes and deletes).
WAITING = "SELECT id, topics, keys, payloads, headers FROM outbox ORDER BY id"



class _OutboxRow(msgspec.Struct, frozen=True):
    """One append's messages, as the relay takes them."""

    id: int
    topics: list[str]
    keys: list[bytes | None]
    payloads: list[bytes]
    headers: list[str | None]


# pool id -> (the pool, kept so that its id is not reused; (row id, index) drained)
_drained: dict[int, tuple[asyncpg.Pool, set[tuple[int, int]]]] = {}


async def drain_outbox(pool: asyncpg.Pool, topic: str) -> list[Delivered]:
    """The outbox messages of one topic not drained before, as the consumer would receive
    them. Rows stay (an outbox row holds an append's messages of every topic); what this
    database's messages were already taken is remembered per pool."""
    taken = _drained.setdefault(id(pool), (pool, set()))[1]
    async with pool.acquire() as conn:
        rows = many(_OutboxRow, await conn.fetch(WAITING))
    mine = []
    for r in rows:
        for i, (t, payload) in enumerate(zip(r.topics, r.payloads, strict=True)):
            if t == topic and (r.id, i) not in taken:
                taken.add((r.id, i))
                mine.append(payload)
    return [Delivered(topic, 0, i, (), decode(payload)) for i, payload in enumerate(mine)]
