"""Idempotent and fenced side effects in your own PostgreSQL database (asyncpg).

Execution is at-least-once: an attempt may apply its effect and crash before reporting, and a
worker paused past its lease (GC pause, SIGSTOP, VM migration) may wake up and keep writing
while a newer attempt owns the run. Two helpers close both gaps *inside the transaction that
applies the effect*, so the effect and its bookkeeping commit together or not at all::

    from ostinato.sdk import current, task
    from ostinato.sdk.effects import apply_once, fence, install

    await install(conn)                      # once, at start-up (idempotent, concurrency-safe)

    @task("billing.charge")
    async def charge(payload: dict) -> None:
        async with pool.acquire() as conn, conn.transaction():
            await fence(conn)                # refuse if a newer attempt already wrote
            if await apply_once(conn, name="charge"):
                await conn.execute("INSERT INTO charges ...")   # runs once per run, ever

- ``apply_once(conn, key=None, *, name=None)`` inserts a dedupe row keyed by the run's
  idempotency key (the same for every attempt of the run), suffixed ``/name`` when one handler
  has several effects. True: first time, apply the effect. False: an earlier attempt committed
  it, skip. Rolled back with the effect (a crash before commit leaves neither, and the retry
  applies it); a concurrent attempt inserting the same key waits for ours and then sees it.
- ``fence(conn, run_id=None, token=None)`` records the attempt's fencing token for the run with a
  conditional upsert that refuses a token lower than the highest already recorded. The row lock
  it takes orders concurrent attempts; refused: ``LeaseLost`` (derives from ``BaseException``),
  the transaction rolls back, nothing of the late attempt is written and its outcome is not
  reported. Fence every transaction whose writes a stale attempt must not make.

Both need an open transaction (``conn.transaction()``); outside one they raise, because a
dedupe row or fence committed on its own protects nothing.

Other stores, same two ideas:

- *Fencing*: keep the highest applied token next to the data and make every write conditional on
  it in the same atomic operation: ``UPDATE ... SET v = $1, token = $2 WHERE id = $3 AND token <=
  $2`` (SQL), a conditional put (``ConditionExpression="attribute_not_exists(token) OR token <=
  :t"`` in DynamoDB, ``If-Match`` with an ETag in S3 / HTTP, a compare-and-set in Redis (Lua)
  or etcd (revision)); zero rows / a failed condition means a newer attempt won: stop.
- *Idempotency*: pass ``current().idempotency_key`` (plus an effect name) to APIs that accept
  one (Stripe's ``Idempotency-Key``, a message id for de-duplicating queues). After an ambiguous
  outcome (a timeout: did the call happen?) query the external system *by that key* before
  repeating the call (e.g. list charges whose metadata holds the key) and only repeat when it
  reports nothing; record what you learn with ``apply_once`` in your own database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ostinato.sdk.context import RunContext, current
from ostinato.sdk.errors import LeaseLost, OstinatoWorkerError

if TYPE_CHECKING:  # the user's own driver; nothing of it is needed at run time
    import asyncpg

__all__ = ["EFFECTS_DDL", "apply_once", "fence", "install"]

EFFECTS_DDL = """
CREATE TABLE IF NOT EXISTS ostinato_effects (
    key        text PRIMARY KEY,
    run_id     text NOT NULL,
    attempt    int NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS ostinato_fences (
    run_id        text PRIMARY KEY,
    fencing_token bigint NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
"""

_DDL_LOCK = 0x6F7374696E61  # advisory lock id ("ostina"): concurrent installs wait, not fail

_APPLY_ONCE = """
INSERT INTO ostinato_effects (key, run_id, attempt) VALUES ($1, $2, $3)
ON CONFLICT (key) DO NOTHING
RETURNING 1
"""

_FENCE = """
INSERT INTO ostinato_fences (run_id, fencing_token) VALUES ($1, $2)
ON CONFLICT (run_id) DO UPDATE
    SET fencing_token = excluded.fencing_token, updated_at = now()
    WHERE ostinato_fences.fencing_token <= excluded.fencing_token
RETURNING 1
"""

async def install(conn: asyncpg.Connection[Any]) -> None:
    """Create the two tables if missing; safe to call from many workers at once."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _DDL_LOCK)
        await conn.execute(EFFECTS_DDL)


async def apply_once(
    conn: asyncpg.Connection[Any],
    key: str | None = None,
    *,
    name: str | None = None,
    run_id: str | None = None,
    attempt: int | None = None,
) -> bool:
    """Record the effect ``key`` as applied; True if this is its first time (apply it now).

    ``key`` defaults to ``current().idempotency_key``, suffixed ``/{name}`` when ``name`` is
    given (also with an explicit key). ``run_id``/``attempt`` are stored for triage and default
    to the current attempt's. Must run inside the transaction that applies the effect.
    """
    ctx = _current_or_none()
    if key is None:
        if ctx is None:
            raise OstinatoWorkerError("apply_once() outside a handler needs an explicit key")
        key = ctx.idempotency_key
    if name:
        key = f"{key}/{name}"
    _require_transaction(conn, "apply_once")
    row = await conn.fetchval(
        _APPLY_ONCE,
        key,
        run_id if run_id is not None else (ctx.run_id if ctx else ""),
        attempt if attempt is not None else (ctx.attempt if ctx else 0),
    )
    return row is not None


async def fence(
    conn: asyncpg.Connection[Any], run_id: str | None = None, token: int | None = None
) -> None:
    """Refuse (``LeaseLost``) if a higher fencing token was already applied for the run.

    Defaults to the current attempt's run id and token. Must run inside the transaction whose
    writes it protects; the row lock it takes is held until that transaction ends, so a
    concurrent older attempt waits and is then refused.
    """
    ctx = _current_or_none()
    if run_id is None or token is None:
        if ctx is None:
            raise OstinatoWorkerError("fence() outside a handler needs run_id and token")
        run_id = ctx.run_id if run_id is None else run_id
        token = ctx.fencing_token if token is None else token
    _require_transaction(conn, "fence")
    if await conn.fetchval(_FENCE, run_id, token) is None:
        if ctx is not None and ctx.run_id == run_id and ctx.fencing_token == token:
            ctx.mark_lease_lost()  # the database knows a newer attempt: so should the worker
        raise LeaseLost(run_id, f"fencing token {token} is older than one already applied")


def _current_or_none() -> RunContext | None:
    try:
        return current()
    except OstinatoWorkerError:
        return None


def _require_transaction(conn: Any, helper: str) -> None:
    in_transaction = getattr(conn, "is_in_transaction", None)
    if in_transaction is not None and not in_transaction():
        raise OstinatoWorkerError(
            f"{helper}() must run inside the transaction that applies the effect "
            "(async with conn.transaction(): ...)"
        )
