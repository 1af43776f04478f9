"""A worker process for the fault suite and bench/chaos.py: an SDK `Worker` whose one task,
`fx`, records its effect in the table `effects` of a PostgreSQL database, fenced and at most
once per run (`ostinato.sdk.effects.fence` + `apply_once` in the effect's own transaction).

    python tests/faults/worker_proc.py --gateway URL --key KEY --effects-db URL [--id NAME]
        [--concurrency 16] [--grace 0] [--sleep 0] [--sleep-max 0] [--claim-wait 10]
        [--log-level info]

Every option may also come from the environment: OSTINATO_GATEWAY_URL, OSTINATO_API_KEY,
OSTINATO_EFFECTS_DATABASE_URL, OSTINATO_WORKER_ID, OSTINATO_WORKER_CONCURRENCY,
OSTINATO_WORKER_GRACE_SECONDS, OSTINATO_WORKER_SLEEP_SECONDS, OSTINATO_WORKER_SLEEP_MAX_SECONDS,
OSTINATO_WORKER_CLAIM_WAIT_SECONDS (the long poll; the SDK's default, 10 s).

The payload of an `fx` run (a JSON object, all keys optional) shapes the attempt:

- `sleep`: seconds to wait *before* the effect (default `--sleep`, or with `--sleep-max` above
  it a uniformly random time between the two, drawn per attempt): a kill -9 or SIGSTOP then
  lands mid-run with nothing written yet;
- `hold`: seconds to wait *after* the effect committed, before the outcome is reported: a kill
  then leaves an applied effect whose retry must not apply it again;
- `heartbeat`: true to call `current().heartbeat()` right before the effect (a paused worker
  learns at once that it lost the lease);
- `slow_attempts`: `sleep` and `hold` apply only to attempts up to this number (the retry
  after a fault then runs at once).

A second task, `wf`, is a workflow (`ostinato.sdk.workflow`) of `steps` steps (default 3),
each writing one row of the table `step_effects` with no dedupe at all, so a step run twice
shows as two rows. Its payload: `sleep_in` seconds inside step `slow_step` before its effect,
`pause_between` seconds after step `pause_after` was recorded; both on the first attempt only.
`sleep_seconds` of a durable timer (`ctx.sleep`) after step `sleep_after`. With `compensate`,
each step registers a compensation writing a row of `step_effects` with seq `-1 - seq` (no
dedupe either); step `fail_at` raises a permanent error, so the compensations run; the one of
step `slow_compensation` sleeps `sleep_in` seconds before its effect on the first attempt.

A fourth task, `upd`, is a workflow that answers `updates` updates named `work` (default 1,
`ctx.handle_update`); each update's handler runs a step writing a row of `step_effects` (seq:
the update's rank), after `sleep_in` seconds on the run attempt `slow_attempt` (a kill -9 then
lands inside the handler, the update taken and recorded, its answer not).

A third task, `fan`, is a workflow that fans out `chunks` runs of `fx` (each chunk's payload
`{"i": index, "sleep": chunk_sleep}`) with `max_concurrency` `cap` (default 50) and `fx` as its
completion run (`ctx.fan_out`): every chunk's and the completion's effect is an `effects` row.

The effect row is written only when `apply_once` says it is the run's first; the output says
whether this attempt applied it. Database errors (PostgreSQL restarting) are retried inside the
attempt for up to 30 s, then reported as a retryable failure. The process prints `worker_proc
ready <id>` once it can take work, stops gracefully on SIGTERM/SIGINT (releasing unfinished
runs after `--grace` seconds) and is meant to be killed with -9 or frozen with SIGSTOP/SIGCONT.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time

import asyncpg

from ostinato.sdk import (
    PermanentError,
    RetryableError,
    Worker,
    WorkflowContext,
    current,
    task,
    workflow,
)
from ostinato.sdk.effects import apply_once, fence, install
from ostinato.telemetry.logging import configure_logging, get_logger

EFFECTS_DDL = """
CREATE TABLE IF NOT EXISTS effects (
    id              bigserial   PRIMARY KEY,
    idempotency_key text        NOT NULL,
    run_id          uuid        NOT NULL,
    job_id          uuid        NOT NULL,
    attempt         int         NOT NULL,
    fencing_token   bigint      NOT NULL,
    worker_id       text        NOT NULL,
    applied_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""
STEP_EFFECTS_DDL = """
CREATE TABLE IF NOT EXISTS step_effects (
    run_id     uuid        NOT NULL,
    seq        int         NOT NULL,
    attempt    int         NOT NULL,
    worker_id  text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""
# Deliberately no unique constraint: a second row for a key would be a duplicated effect that
# the checks must be able to see, not an error that hides it.

INSERT_EFFECT = """
INSERT INTO effects (idempotency_key, run_id, job_id, attempt, fencing_token, worker_id)
VALUES ($1, $2, $3, $4, $5, $6)
"""
DB_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)
DB_RETRY_SECONDS = 30.0

log = get_logger("worker_proc")


class Effects:
    """The effects database; connections are (re)made lazily so a restart is survived."""

    def __init__(self, url: str, worker_id: str) -> None:
        self.url = url
        self.worker_id = worker_id
        self.pool: asyncpg.Pool | None = None

    async def open(self, within: float = 60.0) -> None:
        deadline = time.monotonic() + within
        while True:
            try:
                self.pool = await asyncpg.create_pool(self.url, min_size=1, max_size=32,
                                                      command_timeout=10)
                async with self.pool.acquire() as conn:
                    await install(conn)
                    async with conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock(4242)")
                        await conn.execute(EFFECTS_DDL)
                        await conn.execute(STEP_EFFECTS_DDL)
                return
            except DB_ERRORS:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def apply(self) -> bool:
        """Fence, dedupe and write the current run's effect in one transaction; True if this
        attempt applied it. LeaseLost (a newer attempt already wrote) propagates."""
        ctx = current()
        assert self.pool is not None
        deadline = time.monotonic() + DB_RETRY_SECONDS
        while True:
            try:
                async with self.pool.acquire(timeout=5) as conn, conn.transaction():
                    await fence(conn)
                    if not await apply_once(conn):
                        return False
                    await conn.execute(INSERT_EFFECT, ctx.idempotency_key, ctx.run_id,
                                       ctx.job_id, ctx.attempt, ctx.fencing_token,
                                       self.worker_id)
                    return True
            except DB_ERRORS as exc:
                if time.monotonic() > deadline:
                    raise RetryableError(f"effects database unreachable: {exc!r}",
                                         type="effects_db_down") from exc
                log.warning("effect.retry", error=repr(exc))
                await asyncio.sleep(0.3)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--gateway", default=env("OSTINATO_GATEWAY_URL"))
    parser.add_argument("--key", default=env("OSTINATO_API_KEY"))
    parser.add_argument("--effects-db", default=env("OSTINATO_EFFECTS_DATABASE_URL"))
    parser.add_argument("--id", default=env("OSTINATO_WORKER_ID"))
    parser.add_argument("--concurrency", type=int,
                        default=int(env("OSTINATO_WORKER_CONCURRENCY", "16")))
    parser.add_argument("--grace", type=float,
                        default=float(env("OSTINATO_WORKER_GRACE_SECONDS", "0")))
    parser.add_argument("--sleep", type=float,
                        default=float(env("OSTINATO_WORKER_SLEEP_SECONDS", "0")))
    parser.add_argument("--sleep-max", type=float,
                        default=float(env("OSTINATO_WORKER_SLEEP_MAX_SECONDS", "0")))
    parser.add_argument("--claim-wait", type=float,
                        default=float(env("OSTINATO_WORKER_CLAIM_WAIT_SECONDS", "10")))
    parser.add_argument("--no-pings", dest="pings", action="store_false",
                        default=env("OSTINATO_WORKER_PINGS", "1") != "0",
                        help="send no liveness pings: only the lease tells the worker died")
    parser.add_argument("--log-level", default=env("OSTINATO_LOG_LEVEL", "info"))
    args = parser.parse_args(argv)
    missing = [n for n in ("gateway", "key", "effects_db") if not getattr(args, n)]
    if missing:
        parser.error(f"missing: {', '.join(missing)} (argument or environment)")
    return args


async def amain(args: argparse.Namespace) -> None:
    worker_id = args.id or f"fx-{os.getpid()}"
    effects = Effects(args.effects_db, worker_id)
    await effects.open()

    @task("fx")
    async def fx(payload: object) -> dict[str, object]:
        p = payload if isinstance(payload, dict) else {}
        ctx = current()
        slow = ctx.attempt <= int(p.get("slow_attempts", ctx.attempt))
        if slow:
            default = args.sleep if args.sleep_max <= args.sleep else \
                random.uniform(args.sleep, args.sleep_max)
            await asyncio.sleep(float(p.get("sleep", default)))
        if p.get("heartbeat"):
            await ctx.heartbeat()
        applied = await effects.apply()
        if slow and p.get("hold"):
            await asyncio.sleep(float(p["hold"]))
        return {"applied": applied, "worker": worker_id, "token": ctx.fencing_token}

    async def step_effect(seq: int, sleep_in: float) -> int:
        ctx = current()
        if sleep_in and ctx.attempt == 1:
            await asyncio.sleep(sleep_in)
        assert effects.pool is not None
        await effects.pool.execute(
            "INSERT INTO step_effects (run_id, seq, attempt, worker_id) VALUES ($1, $2, $3, $4)",
            ctx.run_id, seq, ctx.attempt, worker_id)
        return seq

    @workflow("wf")
    async def wf(ctx: WorkflowContext, payload: object) -> dict[str, object]:
        p = payload if isinstance(payload, dict) else {}
        first = ctx.run.attempt == 1

        async def undo(seq: int) -> None:
            slow = seq == p.get("slow_compensation")
            await step_effect(-1 - seq, float(p.get("sleep_in", 0)) if slow else 0)

        for seq in range(int(p.get("steps", 3))):
            if seq == p.get("fail_at"):
                await ctx.step(f"s{seq}", _fail, seq)
            slow = seq == p.get("slow_step")
            await ctx.step(f"s{seq}", step_effect, seq, float(p.get("sleep_in", 0)) if slow else 0,
                           compensate=undo if p.get("compensate") else None,
                           compensate_retries=1)
            if first and seq == p.get("pause_after"):
                await asyncio.sleep(float(p.get("pause_between", 0)))
            if seq == p.get("sleep_after"):  # a durable timer: the run leaves the worker
                await ctx.sleep(float(p.get("sleep_seconds", 0)))
        return {"worker": worker_id}

    @workflow("fan")
    async def fan(ctx: WorkflowContext, payload: object) -> dict[str, object]:
        p = payload if isinstance(payload, dict) else {}
        chunks = [{"i": i, "sleep": float(p.get("chunk_sleep", 0))}
                  for i in range(int(p.get("chunks", 10)))]
        summary = await ctx.fan_out(fx, chunks, max_concurrency=int(p.get("cap", 50)),
                                    on_complete=fx, retry=p.get("chunk_retry"))
        return {"succeeded": summary["succeeded"], "failed": summary["failed"]}

    @workflow("upd")
    async def upd(ctx: WorkflowContext, payload: object) -> dict[str, object]:
        p = payload if isinstance(payload, dict) else {}
        done: list[int] = []

        async def effect(seq: int) -> int:
            if current().attempt == int(p.get("slow_attempt", 0)):
                await asyncio.sleep(float(p.get("sleep_in", 0)))
            assert effects.pool is not None
            await effects.pool.execute(
                "INSERT INTO step_effects (run_id, seq, attempt, worker_id) "
                "VALUES ($1, $2, $3, $4)", current().run_id, seq, current().attempt, worker_id)
            return seq

        async def work(body: object) -> dict[str, object]:
            seq = len(done)
            await ctx.step(f"work{seq}", effect, seq)
            done.append(seq)
            return {"seq": seq, "worker": worker_id}

        while len(done) < int(p.get("updates", 1)):
            await ctx.handle_update({"work": work})
        return {"worker": worker_id}

    worker = Worker(args.gateway, args.key, [fx, wf, fan, upd], concurrency=args.concurrency,
                    worker_id=worker_id, claim_wait_seconds=args.claim_wait,
                    shutdown_grace_seconds=args.grace, capture_logs=False,
                    **({} if args.pings else {"liveness_seconds": None}))
    print(f"worker_proc ready {worker_id}", flush=True)
    try:
        await worker.run_until_signal()
    finally:
        await effects.close()
        print(f"worker_proc stopped {worker_id}", flush=True)


def _fail(seq: int) -> None:
    raise PermanentError(f"step {seq} fails for good", type="declined")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    configure_logging("worker_proc", args.log_level)
    asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
