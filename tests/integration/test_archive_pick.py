"""The archiver's pick (stores/sql/archive.sql `archive_candidates`, one statement a batch) on
the real PostgreSQL picks exactly the runs the pure rules (`ostinato.domain.retention.removable`,
the oracle) let go: generated runs, each with its own job, dead letter, hold, parent, child,
DAG run and sibling as drawn, whose facts are also worked out in Python from what was drawn;
the operator's retention floor (OSTINATO_RETENTION_FLOOR_SECONDS) bounds every tenant's keep;
and the procedure's own per-run reading (ostinato_run_kept) agrees."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg
import pytest

from ostinato.domain.retention import Kept, RetentionPolicy, RunFacts, removable
from ostinato.runs import retention as retention_commands
from ostinato.stores import archive as archive_store
from tests.helpers.integration import new_tenant, store

pytestmark = pytest.mark.integration

FINAL = ("succeeded", "dead_lettered", "cancelled")
# no queued or running: those would need run_slots rows (the fixture checks they agree)
NOT_FINAL = ("scheduled", "failed", "retry_scheduled", "suspended")
DAG_STATES = ("pending", "running", "succeeded", "failed", "cancelled")
WINDOW = timedelta(hours=24)
HOUR = timedelta(hours=1)

JOB = """
INSERT INTO jobs (id, tenant_id, name, task, status, schedule, payload_ref, pool, priority,
                  runs_created, created_at, updated_at, version, kind, overlap, shard,
                  complete_within_seconds, consecutive_failures)
VALUES ($1, $2, 'pick', 'noop', $3, '{}', gen_random_uuid(), 'default', 'default', 1, now(),
        now(), 1, $4, 'allow', 0, $5, 0)
"""
RUN = """
INSERT INTO runs (id, tenant_id, job_id, task, pool, priority, payload_ref, scheduled_for,
                  state, attempt, fencing_token, updated_at, version, finished_at, trigger,
                  parent_run_id, parent_notified)
VALUES ($1, $2, $3, 'noop', 'default', 'default', gen_random_uuid(), $4, $5, 1, 1, now(), 1,
        $6, $7, $8, $9)
"""
DEAD_LETTER = """
INSERT INTO dead_letters (run_id, tenant_id, job_id, task, reason, attempts, dead_lettered_at,
                          triage_state, triaged_at)
VALUES ($1, $2, $3, 'noop', 'boom', 1, now(), $4, $5)
"""
EVENT = """
INSERT INTO events (stream_id, version, stream_type, tenant_id, event_id, type, data, actor,
                    occurred_at)
VALUES ($1, 1, 'run', $2, gen_random_uuid(), 'RunScheduled', '{}', 'test', now())
"""
HOLD = """
INSERT INTO run_holds (run_id, tenant_id, reason, held_by, held_at)
VALUES ($1, $2, 'legal', 'op', now())
"""
DAG_RUN = """
INSERT INTO dag_runs (id, tenant_id, dag_id, dag_version, state, trigger, due_at, created_at,
                      updated_at, version)
VALUES ($1, $2, gen_random_uuid(), 1, $3, 'manual', now(), now(), now(), 1)
"""
DAG_NODE = """
INSERT INTO dag_run_nodes (dag_run_id, key, tenant_id, state, run_id, updated_at)
VALUES ($1, 'node', $2, 'done', $3, now())
"""


@dataclass(frozen=True)
class Case:
    run_id: uuid.UUID
    tenant_id: uuid.UUID
    facts: RunFacts
    keep_seconds: int  # the tenant's, before the floor


async def _generate(conn: asyncpg.Connection, rng: random.Random, now: datetime,
                    tenants: dict[uuid.UUID, int], aux: uuid.UUID, floor: int,
                    n: int) -> list[Case]:
    """`n` runs over `tenants` (id -> keep seconds) drawn around the rules' boundaries (an end
    an hour either side of the retention under `floor`, a slot two hours either side of the
    window), their related rows in tenant `aux`; each with the facts the rules read, worked
    out from what was drawn as docs/RETENTION.md's table says."""
    cases = []
    for _ in range(n):
        tenant_id = rng.choice(list(tenants))
        keep = max(tenants[tenant_id], floor)
        run_id, job_id = uuid.uuid4(), uuid.uuid4()
        state = rng.choice(FINAL * 3 + NOT_FINAL)
        if state in FINAL:
            ended = (now - timedelta(seconds=keep) + rng.choice(
                (-HOUR, HOUR / 2, -timedelta(days=40)))) if rng.random() < 0.95 else None
        else:
            ended = rng.choice((None, None, now - timedelta(days=40)))
        kind = rng.choice(("at", "cron", "every"))
        status = rng.choice(("active", "paused", "completed", "deleted"))
        complete_within = rng.choice((None, None, 3600))
        slot = now - rng.choice((WINDOW - 2 * HOUR, WINDOW + 2 * HOUR, timedelta(days=40)))
        dag_state = rng.choice(DAG_STATES) if rng.random() < 0.15 else None
        trigger = "dag" if dag_state else rng.choice(("manual", "schedule", "api"))
        parent = rng.choice(("none",) * 5 + ("missing", "hot"))
        parent_state = rng.choice(FINAL + NOT_FINAL) if parent == "hot" else None
        notified = parent == "none" or rng.random() < 0.8
        triage = rng.choice((None, None, None, "new", "acknowledged", "resolved"))
        triaged_at = (now - timedelta(seconds=keep) + rng.choice((-HOUR, HOUR / 2))
                      if triage in ("acknowledged", "resolved") and rng.random() < 0.7
                      else None)
        held = rng.random() < 0.15
        child = rng.random() < 0.1
        sibling = rng.random() < 0.3

        await conn.execute(JOB, job_id, tenant_id, status, kind, complete_within)
        parent_id = None
        if parent == "missing":
            parent_id = uuid.uuid4()  # not in the hot tables
        elif parent == "hot":
            parent_id = uuid.uuid4()
            await conn.execute(RUN, parent_id, aux, uuid.uuid4(), now, parent_state,
                               now if parent_state in FINAL else None, "api", None, False)
        await conn.execute(RUN, run_id, tenant_id, job_id, slot, state, ended, trigger,
                           parent_id, notified)
        await conn.execute(EVENT, run_id, tenant_id)
        if triage is not None:
            await conn.execute(DEAD_LETTER, run_id, tenant_id, job_id, triage, triaged_at)
        if held:
            await conn.execute(HOLD, run_id, tenant_id)
        if child:  # a child not final (in the aux tenant)
            await conn.execute(RUN, uuid.uuid4(), aux, uuid.uuid4(), now, "suspended", None,
                               "api", run_id, False)
        if dag_state is not None:
            dag_run = uuid.uuid4()
            await conn.execute(DAG_RUN, dag_run, tenant_id, dag_state)
            await conn.execute(DAG_NODE, dag_run, tenant_id, run_id)
        if sibling:  # a later success of the same job, by slot and by end
            await conn.execute(RUN, uuid.uuid4(), aux, job_id, slot + timedelta(minutes=1),
                               "succeeded", now, "schedule", None, False)

        recurring = kind in ("cron", "every")
        facts = RunFacts(
            state=state, ended_at=ended, held=held, dead_letter_triage=triage,
            triaged_at=triaged_at, children_not_final=child, parent_state=parent_state,
            parent_notified=notified,
            dag_run_state=dag_state,
            checked_slot=(slot if trigger != "manual" and recurring
                          and status in ("active", "paused") else None),
            deadline=(slot + timedelta(seconds=complete_within)
                      if complete_within and parent_id is None and trigger != "dag" else None),
            latest_success_of_job=(state == "succeeded" and recurring and status != "deleted"
                                   and trigger != "dag" and not sibling))
        cases.append(Case(run_id, tenant_id, facts, tenants[tenant_id]))
    return cases


def _expected(cases: list[Case], floor: int, now: datetime) -> tuple[set[uuid.UUID],
                                                                     set[Kept]]:
    """The runs the oracle lets go with the floor applied to each tenant's keep, and every
    reason it kept one for."""
    removable_ids, reasons = set(), set()
    for case in cases:
        policy = RetentionPolicy(keep_seconds=max(case.keep_seconds, floor))
        decision = removable(case.facts, policy, now, checks_window=WINDOW)
        reasons.update(decision.kept)
        if decision.removable:
            removable_ids.add(case.run_id)
    return removable_ids, reasons


async def test_the_pick_is_the_pure_rules_on_generated_runs(pool: asyncpg.Pool) -> None:
    """600 generated runs over three tenants (the default 30 days, 2 hours, and 60 seconds:
    below the default floor, set by an operator whose floor was 60): with the floor at an hour
    the pick takes exactly the runs `removable` lets go under greatest(keep, 3600); with the
    floor at 60 seconds, exactly those under each tenant's own keep, which is also every run
    ostinato_run_kept (the procedure's re-check) finds nothing keeping; every reason is met;
    a smaller limit takes that many of them."""
    default, _ = await new_tenant(pool)
    two_hours, _ = await new_tenant(pool)
    minute, _ = await new_tenant(pool)
    aux, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        await retention_commands.set_retention(conn, store(), tenant_id=two_hours, keep="2h",
                                               archive=True, actor="admin")
        await retention_commands.set_retention(conn, store(), tenant_id=minute, keep=60,
                                               archive=False, actor="admin", floor=60)
        now = await conn.fetchval("SELECT now()")
    tenants = {default: 30 * 86400, two_hours: 7200, minute: 60}
    rng = random.Random(38)
    async with pool.acquire() as conn, conn.transaction():
        # `minute`'s ends drawn around the hour's floor: 30 minutes ago is inside it, and
        # outside the tenant's own 60 seconds
        cases = await _generate(conn, rng, now, tenants, aux, 3600, 600)
    subjects = {c.run_id for c in cases}
    archive_of = {default: True, two_hours: True, minute: False}

    async with pool.acquire() as conn:
        await conn.execute("ANALYZE")
        picked_hour = await archive_store.candidates(conn, 100_000, WINDOW, 3600)
        picked_minute = await archive_store.candidates(conn, 100_000, WINDOW, 60)
        no_reason = {r["id"] for r in await conn.fetch(
            "SELECT id FROM runs WHERE id = ANY($1::uuid[])"
            " AND cardinality(ostinato_run_kept(id, now(), $2::interval)) = 0",
            list(subjects), WINDOW)}
        few = await archive_store.candidates(conn, 3, WINDOW, 3600)

    # the draws are an hour or more from each boundary: the seconds between `now` and the
    # statements do not move a run across one
    expected_hour, reasons_hour = _expected(cases, 3600, now)
    expected_minute, reasons_minute = _expected(cases, 60, now)
    assert {c.run_id for c in picked_hour} == expected_hour
    assert {c.run_id for c in picked_minute} == expected_minute
    assert no_reason == expected_minute  # ostinato_run_kept knows no floor: the tenant's keep
    assert set(Kept) == reasons_hour | reasons_minute, set(Kept) - reasons_hour - reasons_minute
    assert expected_hour and expected_minute and expected_minute - expected_hour  # the floor
    for c in picked_hour + picked_minute:
        assert c.tenant_id in tenants and c.archive is archive_of[c.tenant_id]
        assert c.version == 1  # its stream's head: what the removal will expect
    assert len(few) == 3 and {c.run_id for c in few} <= expected_hour
