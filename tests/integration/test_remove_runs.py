"""Archive, then remove: migration 0046's owner-role procedure `ostinato_remove_runs` over the
real PostgreSQL. Its rules are those of `ostinato.domain.retention` (the same cases fed to both
agree); it is the one door out of the hot tables (the services' role can call it and still
cannot UPDATE or DELETE the log); a removed run leaves no row in any hot table (the tables are
listed, so a new one is not forgotten); each rule keeps its run; and a rebuild of the
projections after a removal gives the live rows, usage and the job's counters unchanged."""

from __future__ import annotations

import dataclasses
import random
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from ostinato.domain.retention import RetentionPolicy, RunFacts, removable
from ostinato.eventlog.readmodels import snapshot
from ostinato.eventlog.rebuild import rebuild
from ostinato.runs import retention as retention_commands
from ostinato.stores import usage as usage_store
from tests.helpers.api import auth
from tests.helpers.env import owner_url_for
from tests.helpers.expired_runs import (
    APP_ROLE_CALL,
    days_ago,
    finished_run,
    recurring_runs,
    stream_version,
)
from tests.helpers.integration import new_tenant, store
from tests.helpers.privileges import APP_ROLE, database

pytestmark = pytest.mark.integration

FINAL = ("succeeded", "dead_lettered", "cancelled")
STATES = (*FINAL, "scheduled", "queued", "running", "failed", "retry_scheduled", "suspended")
DAG_STATES = (None, "pending", "running", "succeeded", "failed", "cancelled")


# -- the rules: SQL and Python agree ---------------------------------------------------------


def _cases(n: int, seed: int = 38) -> list[tuple[RunFacts, RetentionPolicy, datetime,
                                                 timedelta]]:
    """Random facts around the boundaries (an end exactly `keep` ago, a slot exactly the
    window ago), plus every single reason on its own."""
    rng = random.Random(seed)
    now = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    cases = []
    for _ in range(n):
        keep = rng.choice((3600, 86400, 30 * 86400))
        window = rng.choice((timedelta(0), timedelta(hours=1), timedelta(hours=24)))

        def near(base: timedelta) -> datetime:
            return now - base + rng.choice((timedelta(0), timedelta(microseconds=1),
                                            -timedelta(microseconds=1), timedelta(hours=3),
                                            -timedelta(days=2)))

        state = rng.choice(STATES)
        ended = near(timedelta(seconds=keep)) if rng.random() < 0.9 else None
        triage = rng.choice((None, "new", "acknowledged", "resolved"))
        facts = RunFacts(
            state=state, ended_at=ended, held=rng.random() < 0.2,
            dead_letter_triage=triage,
            triaged_at=(near(timedelta(seconds=keep)) if triage not in (None, "new")
                        and rng.random() < 0.7 else None),
            children_not_final=rng.random() < 0.2,
            parent_state=rng.choice((None, None, *STATES)),
            parent_notified=rng.random() < 0.8,
            dag_run_state=rng.choice(DAG_STATES),
            checked_slot=near(window) if rng.random() < 0.4 else None,
            deadline=near(window) if rng.random() < 0.3 else None,
            latest_success_of_job=rng.random() < 0.15)
        cases.append((facts, RetentionPolicy(keep_seconds=keep), now, window))
    base = RunFacts(state="succeeded", ended_at=now - timedelta(days=40))
    for change in ({}, {"state": "running", "ended_at": None}, {"held": True},
                   {"state": "dead_lettered", "dead_letter_triage": "new"},
                   {"state": "dead_lettered"}, {"children_not_final": True},
                   {"parent_state": "suspended"}, {"parent_notified": False},
                   {"dag_run_state": "running"}, {"ended_at": now - timedelta(days=1)},
                   {"checked_slot": now - timedelta(hours=23)},
                   {"deadline": now - timedelta(hours=24)}, {"latest_success_of_job": True}):
        cases.append((RunFacts(**{**_fields(base), **change}), RetentionPolicy(), now,
                      timedelta(hours=24)))
    return cases


def _fields(facts: RunFacts) -> dict[str, object]:
    return {f.name: getattr(facts, f.name) for f in dataclasses.fields(facts)}


async def test_the_procedures_rules_are_the_pure_rules(pool: asyncpg.Pool) -> None:
    """ostinato_retention_kept (SQL) and ostinato.domain.retention.removable (Python) name the
    same reasons, in the same order, for 3,000 random facts and each reason on its own."""
    cases = _cases(3000)
    columns = list(zip(*[(f.state, f.ended_at, f.held, f.dead_letter_triage, f.triaged_at,
                          f.children_not_final, f.parent_state, f.parent_notified,
                          f.dag_run_state, f.checked_slot, f.deadline, f.latest_success_of_job,
                          policy.keep_seconds, now, window)
                         for f, policy, now, window in cases], strict=True))
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT ord, ostinato_retention_kept(s, e, h, dt, ta, cn, ps, pn, dr, cs, dl, ls,"
            " k, n, w) AS kept"
            " FROM unnest($1::text[], $2::timestamptz[], $3::bool[], $4::text[],"
            " $5::timestamptz[], $6::bool[], $7::text[], $8::bool[], $9::text[],"
            " $10::timestamptz[], $11::timestamptz[], $12::bool[], $13::bigint[],"
            " $14::timestamptz[], $15::interval[])"
            " WITH ORDINALITY AS c(s, e, h, dt, ta, cn, ps, pn, dr, cs, dl, ls, k, n, w, ord)"
            " ORDER BY ord", *[list(c) for c in columns])
    disagree = []
    for (facts, policy, now, window), row in zip(cases, rows, strict=True):
        expected = [k.value for k in removable(facts, policy, now, checks_window=window).kept]
        if list(row["kept"]) != expected:
            disagree.append((facts, policy.keep_seconds, window, row["kept"], expected))
    assert disagree == []
    reasons = {k for row in rows for k in row["kept"]}
    assert len(reasons) == 11  # every reason met at least once
    assert any(not row["kept"] for row in rows)  # and removable runs too


# -- one door: who may call what ---------------------------------------------------------------


async def test_the_services_role_may_call_the_procedure_and_still_not_touch_the_log(
        pool: asyncpg.Pool, app: asyncpg.Connection, db_url: str) -> None:
    """EXECUTE is granted to the services' role alone (not PUBLIC); it runs as the owner with
    its search_path pinned. The role still has no UPDATE or DELETE on `events`, with the
    procedure's flag set or not; the owner without the flag is refused by the trigger."""
    async with pool.acquire() as conn:
        grantees = {r["grantee"] for r in await conn.fetch(
            "SELECT coalesce(pg_get_userbyid(a.grantee), 'PUBLIC') AS grantee"
            " FROM pg_proc p, aclexplode(p.proacl) AS a"
            " WHERE p.proname = 'ostinato_remove_runs' AND a.privilege_type = 'EXECUTE'")}
        definer, config, owner = await conn.fetchrow(
            "SELECT prosecdef, proconfig, pg_get_userbyid(proowner) FROM pg_proc"
            " WHERE proname = 'ostinato_remove_runs'")
    assert grantees == {APP_ROLE, owner}
    assert definer and config == ["search_path=public, pg_temp"]
    tenant_id, _ = await new_tenant(pool)
    await finished_run(pool, tenant_id, ended=days_ago(40))
    before = await app.fetch("SELECT * FROM events ORDER BY seq")
    for statement in ("DELETE FROM events", "UPDATE events SET actor = 'x'",
                      "DELETE FROM usage_carried", "UPDATE usage_carried SET runs = 0"):
        for flag in (False, True):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
                async with app.transaction():
                    if flag:
                        await app.execute("SET LOCAL ostinato.removing_runs = 'on'")
                    await app.execute(statement)
    owner_conn = await asyncpg.connect(owner_url_for(database(db_url)))
    try:
        for statement in ("DELETE FROM events", "UPDATE events SET actor = 'x'",
                          "TRUNCATE events"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await owner_conn.execute(statement)
        # the flag opens DELETE only: UPDATE and TRUNCATE stay refused to the owner too
        for statement in ("UPDATE events SET actor = 'x'", "TRUNCATE events"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                async with owner_conn.transaction():
                    await owner_conn.execute("SET LOCAL ostinato.removing_runs = 'on'")
                    await owner_conn.execute(statement)
    finally:
        await owner_conn.close()
    assert await app.fetch("SELECT * FROM events ORDER BY seq") == before


async def test_bad_arguments_are_refused_and_change_nothing(app: asyncpg.Connection) -> None:
    for ids, versions in (([uuid.uuid4()], []), ([uuid.uuid4()] * 1001, [1] * 1001)):
        with pytest.raises(asyncpg.InvalidParameterValueError):
            await app.fetch(APP_ROLE_CALL, ids, versions)
    with pytest.raises(asyncpg.InvalidParameterValueError, match="checks_window"):
        await app.fetch("SELECT * FROM ostinato_remove_runs($1, $2, interval '-1 hour')",
                        [uuid.uuid4()], [1])


# -- every hot table -----------------------------------------------------------------------------

# Every uuid column naming a run (or a stream) in the schema, and what removal does with it: a
# new table holding runs fails test_every_table_holding_a_run_is_accounted_for until it is
# added here (and to the procedure, if its rows are the run's).
REMOVED_WITH_THE_RUN = {
    ("events", "stream_id"), ("attempt_leases", "run_id"), ("dead_letters", "run_id"),
    ("dispatch_holds", "run_id"), ("run_attribute_numbers", "run_id"),
    ("run_attributes", "run_id"), ("run_holds", "run_id"), ("run_signals", "run_id"),
    ("run_slots", "run_id"), ("run_steps", "run_id"), ("run_steps_set_aside", "run_id"),
    ("run_workflow_ids", "run_id"), ("fan_outs", "parent_run_id"),
}
NOT_THE_RUNS_ROWS = {
    ("runs", "parent_run_id"): "its children: they leave first (child_in_hot_tables)",
    ("runs", "replay_of"): "a replay is a run of its own, with its own retention",
    ("runs", "wait_child"): "a parent's wait, on the parent's row",
    ("dead_letters", "last_replay_run"): "the replay, a run of its own",
    ("fan_outs", "completion_run_id"): "the fan-out's completion run, a run of its own",
    ("dag_run_nodes", "run_id"): "the DAG run's node: it leaves with its DAG run (0052)",
    ("dag_run_nodes", "dag_run_id"): "a DAG run, not a run",
    ("operation_items", "item_id"): "an operation's frozen selection, kept with it",
    ("operation_failures", "item_id"): "an operation's outcome per item, kept with it",
}
RUN_COLUMN = r"(run_id|_run|^stream_id|^replay_of|^wait_child|^item_id)$"


async def test_every_table_holding_a_run_is_accounted_for(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        found = {(r["table_name"], r["column_name"]) for r in await conn.fetch(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND data_type = 'uuid' AND column_name ~ $1",
            RUN_COLUMN)}
    assert found == REMOVED_WITH_THE_RUN | set(NOT_THE_RUNS_ROWS)


async def _side_rows(conn: asyncpg.Connection, run_id: uuid.UUID, tenant_id: uuid.UUID) -> None:
    """A row of the run in each side table a one-off run does not fill by itself (arranged as
    the administrator: a workflow with steps, signals, attributes, an id and a triaged dead
    letter would fill them over many calls)."""
    t = datetime(2026, 1, 1, tzinfo=UTC)
    blob = uuid.uuid4()
    await conn.execute("INSERT INTO blobs (id, tenant_id, data, size_bytes, kind)"
                       " VALUES ($1, $2, '{\"step\": 1}', 11, 'step')", blob, tenant_id)
    for statement, args in (
        ("INSERT INTO run_slots VALUES ($1, $2, 'default', 'normal', 't', NULL)", ()),
        ("INSERT INTO attempt_leases (run_id, tenant_id, fencing_token, worker_id, expires_at)"
         " VALUES ($1, $2, 1, 'w', $3)", (t,)),
        ("INSERT INTO dispatch_holds VALUES ($1, $2, 'r', $3)", (t,)),
        ("INSERT INTO run_attributes VALUES ($1, $2, $3, '{\"a\": 1}')", (t,)),
        ("INSERT INTO run_attribute_numbers VALUES ($1, 'a', $2, $3, 1)", (t,)),
        ("INSERT INTO run_workflow_ids VALUES ($1, $2, 't', 'wf-1', $3, 1)", (t,)),
        ("INSERT INTO run_signals (run_id, signal_id, tenant_id, name, received_at, payload_ref)"
         " VALUES ($1, gen_random_uuid(), $2, 's', $3, $4)", (t, blob)),
        ("INSERT INTO run_steps (run_id, seq, tenant_id, name, succeeded, attempt, tries,"
         " duration_ms, recorded_at, output_ref) VALUES ($1, 1, $2, 's', true, 1, 1, 1, $3, $4)",
         (t, blob)),
        ("INSERT INTO run_steps_set_aside (run_id, set_aside_version, seq, tenant_id, name,"
         " succeeded, attempt, tries, duration_ms, recorded_at, set_aside_at)"
         " VALUES ($1, 2, 1, $2, 's', false, 1, 1, 1, $3, $3)", (t,)),
        ("INSERT INTO dead_letters (run_id, tenant_id, job_id, task, reason, attempts,"
         " dead_lettered_at, triage_state, triaged_at)"
         " SELECT id, tenant_id, job_id, task, 'permanent', 1, $3, 'resolved', $3"
         " FROM runs WHERE id = $1 AND tenant_id = $2", (t,)),
        ("INSERT INTO fan_outs (parent_run_id, seq, tenant_id, name, task, pool, priority,"
         " total, max_concurrency, on_failure, admitted, started_at, version, state,"
         " succeeded) VALUES ($1, 1, $2, 'f', 't', 'default', 'normal', 1, 1, 'fail', 1, $3,"
         " 1, 'succeeded', 1)", (t,)),
    ):
        await conn.execute(statement, run_id, tenant_id, *args)


async def _referencing(conn: asyncpg.Connection, run_id: uuid.UUID) -> dict[str, int]:
    counts = {}
    for table, column in sorted(REMOVED_WITH_THE_RUN):
        counts[table] = await conn.fetchval(
            f"SELECT count(*) FROM {table} WHERE {column} = $1", run_id)
    counts["runs"] = await conn.fetchval("SELECT count(*) FROM runs WHERE id = $1", run_id)
    return counts


async def test_an_expired_run_leaves_every_hot_table_with_its_one_off_job(
        pool: asyncpg.Pool, app: asyncpg.Connection) -> None:
    tenant_id, _ = await new_tenant(pool)
    run_id = await finished_run(pool, tenant_id, ended=days_ago(40), output={"big": "x" * 500})
    other = await finished_run(pool, tenant_id, ended=days_ago(40))  # not asked: stays
    async with pool.acquire() as conn:
        await _side_rows(conn, run_id, tenant_id)
        job_id, payload_ref, output_ref = await conn.fetchrow(
            "SELECT job_id, payload_ref, output_ref FROM runs WHERE id = $1", run_id)
        blobs = [b for b in (payload_ref, output_ref) if b is not None] + [
            r["payload_ref"] for r in await conn.fetch(
                "SELECT payload_ref FROM run_signals WHERE run_id = $1", run_id)]
        before = await _referencing(conn, run_id)
        version = await stream_version(conn, run_id)
        other_before = await _referencing(conn, other)
    # a row in every table, so each deletion is shown (but run_holds: a held run stays)
    assert all(n for table, n in before.items() if table != "run_holds"), before
    assert [tuple(r) for r in await app.fetch(APP_ROLE_CALL, [run_id], [version])] == [
        (run_id, True, None)]
    async with pool.acquire() as conn:
        assert set((await _referencing(conn, run_id)).values()) == {0}
        assert await conn.fetchval("SELECT count(*) FROM blobs WHERE id = ANY($1)", blobs) == 0
        assert await conn.fetchval("SELECT count(*) FROM jobs WHERE id = $1", job_id) == 0
        assert await conn.fetchval("SELECT count(*) FROM events WHERE stream_id = $1",
                                   job_id) == 0
        assert await _referencing(conn, other) == other_before
        assert await conn.fetchval("SELECT count(*) FROM events") > 0


# -- each rule keeps its run ----------------------------------------------------------------------


async def _verdicts(app: asyncpg.Connection, runs: dict[str, uuid.UUID],
                    versions: dict[uuid.UUID, int]) -> dict[str, str | None]:
    ids = list(runs.values())
    rows = {r["run_id"]: r for r in await app.fetch(
        APP_ROLE_CALL, ids, [versions.get(i, 1) for i in ids])}
    return {name: rows[i]["kept_because"] for name, i in runs.items()}


async def test_each_rule_keeps_its_run_and_the_tenants_policy_decides_the_rest(
        pool: asyncpg.Pool, app: asyncpg.Connection) -> None:
    tenant_id, _ = await new_tenant(pool)
    short, _ = await new_tenant(pool)
    async with pool.acquire() as conn:
        await retention_commands.set_retention(conn, store(), tenant_id=short, keep="1h",
                                               archive=False, actor="admin")
    runs = {
        "expired": await finished_run(pool, tenant_id, ended=days_ago(31)),
        "inside_retention": await finished_run(pool, tenant_id, ended=days_ago(29)),
        "held": await finished_run(pool, tenant_id, ended=days_ago(40)),
        "untriaged": await finished_run(pool, tenant_id, ended=days_ago(40), succeed=False),
        "short_expired": await finished_run(pool, short, ended=days_ago(2 / 24)),
        "short_inside": await finished_run(pool, short, ended=days_ago(0.5 / 24)),
        "changed": await finished_run(pool, tenant_id, ended=days_ago(40)),
        "busy": await finished_run(pool, tenant_id, ended=days_ago(40)),
        "not_found": uuid.uuid4(),
    }
    async with pool.acquire() as conn:
        await retention_commands.hold_run(conn, store(), tenant_id=tenant_id,
                                          run_id=runs["held"], actor="op", reason="legal")
        versions = {i: await stream_version(conn, i) or 1 for i in runs.values()}
    versions[runs["changed"]] -= 1  # archived before its last event: must be archived again
    async with pool.acquire() as locker, locker.transaction():
        await locker.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", runs["busy"])
        verdicts = await _verdicts(app, runs, versions)
    assert verdicts == {
        "expired": None, "inside_retention": "inside_retention", "held": "held",
        "untriaged": "dead_letter_untriaged", "short_expired": None,
        "short_inside": "inside_retention", "changed": "changed", "busy": "busy",
        "not_found": "not_found"}
    async with pool.acquire() as conn:
        left = {r["id"] for r in await conn.fetch("SELECT id FROM runs")}
    assert left == set(runs.values()) - {runs["expired"], runs["short_expired"],
                                         runs["not_found"]}


# -- a rebuild after a removal ---------------------------------------------------------------------


async def test_a_rebuild_after_removals_gives_the_live_rows_and_usage_survives(
        pool: asyncpg.Pool, app: asyncpg.Connection) -> None:
    """Runs removed, others kept: rebuilding every projection from what the log still holds
    gives the live rows (start-lag minutes as old as these runs are the lag rule's retention's
    to delete, and are expired on both sides first), and usage over their days is what it was
    before the removal (runs, attempts, worker-seconds, output and payload bytes)."""
    tenant_id, _ = await new_tenant(pool)
    gone = [await finished_run(pool, tenant_id, ended=days_ago(40 + i), output={"i": i})
            for i in range(3)]
    kept = [await finished_run(pool, tenant_id, ended=days_ago(40), succeed=False),
            await finished_run(pool, tenant_id, ended=days_ago(1))]
    start, end = days_ago(45), days_ago(-1)
    async with pool.acquire() as conn:
        versions = [await stream_version(conn, i) for i in gone + kept]
        usage_before = (await usage_store.events_between(conn, tenant_id, start, end, "day"),
                        await usage_store.bytes_between(conn, tenant_id, start, end, "day"))
    verdicts = {r["run_id"]: r["kept_because"]
                for r in await app.fetch(APP_ROLE_CALL, gone + kept, versions)}
    assert [verdicts[i] for i in gone + kept] == [None, None, None, "dead_letter_untriaged",
                                                  "inside_retention"]
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM runs") == 2
        usage_after = (await usage_store.events_between(conn, tenant_id, start, end, "day"),
                       await usage_store.bytes_between(conn, tenant_id, start, end, "day"))
        old_minutes = "DELETE FROM start_lag_minutes WHERE minute < now() - interval '2 days'"
        await conn.execute(old_minutes)
        live = await snapshot(conn)
        assert await rebuild(conn) > 0
        await conn.execute(old_minutes)
        rebuilt = await snapshot(conn)
    assert rebuilt == live
    assert {r["id"] for r in live["runs"]} == set(kept)
    assert usage_after == usage_before
    assert sum(u.runs for u in usage_before[0]) == 5



async def test_a_recurring_jobs_ledger_and_counters_survive_its_runs_removal(
        pool: asyncpg.Pool, app: asyncpg.Connection, client: httpx.AsyncClient) -> None:
    """Four slots of an every-minute job 40 days ago: its ledger over them reads the same after
    three of the runs are removed (the slots' outcomes and states from `ledger_carried`, their
    run ids null), its latest success stays hot, and a rebuild gives its live row back
    (`last_run_at`, `runs_created` and the failure streak come from its own stream)."""
    tenant_id, key = await new_tenant(pool)
    first = days_ago(40).replace(second=0, microsecond=0)
    job_id, run_ids = await recurring_runs(
        pool, tenant_id, first_slot=first,
        states=["succeeded", "succeeded", "dead_lettered", "succeeded"])
    window = {"from": first.isoformat(), "to": (first + timedelta(minutes=4)).isoformat()}

    async def ledger() -> list[dict]:
        r = await client.get(f"/v1/jobs/{job_id}/ledger", params=window, headers=auth(key))
        assert r.status_code == 200, r.text
        return r.json()["items"]

    before = await ledger()
    assert [(e["outcome"], e["state"]) for e in before] == [
        ("completed", "succeeded"), ("completed", "succeeded"), ("failed", "dead_lettered"),
        ("completed", "succeeded")]
    async with pool.acquire() as conn:
        await conn.execute("UPDATE dead_letters SET triage_state = 'resolved', triaged_at ="
                           " now() - interval '39 days' WHERE run_id = $1", run_ids[2])
        versions = [await stream_version(conn, i) for i in run_ids]
    verdicts = [r["kept_because"] for r in sorted(
        await app.fetch(APP_ROLE_CALL, run_ids, versions),
        key=lambda r: run_ids.index(r["run_id"]))]
    assert verdicts == [None, None, None, "latest_success_of_job"]
    after = await ledger()
    assert [(e["slot"], e["outcome"], e["state"]) for e in after] == [
        (e["slot"], e["outcome"], e["state"]) for e in before]
    assert [e["run_id"] for e in after] == [None, None, None, str(run_ids[3])]
    async with pool.acquire() as conn:
        assert [tuple(r) for r in await conn.fetch(
            "SELECT first_slot, last_slot, state, runs FROM ledger_carried WHERE job_id = $1"
            " ORDER BY first_slot", job_id)] == [
            (first, first + timedelta(minutes=1), "succeeded", 2),
            (first + timedelta(minutes=2), first + timedelta(minutes=2), "dead_lettered", 1)]
        old_minutes = "DELETE FROM start_lag_minutes WHERE minute < now() - interval '2 days'"
        await conn.execute(old_minutes)
        live = await snapshot(conn)
        assert await rebuild(conn) > 0
        await conn.execute(old_minutes)
        rebuilt = await snapshot(conn)
    [job] = [j for j in live["jobs"] if j["id"] == job_id]
    assert job["runs_created"] == 4 and job["last_run_at"] == first + timedelta(minutes=3)
    assert rebuilt == live


async def test_a_backfill_over_removed_runs_slots_creates_no_second_run(
        pool: asyncpg.Pool, app: asyncpg.Connection, client: httpx.AsyncClient) -> None:
    """One run per occurrence outlives retention: after two runs of an every-minute job are
    removed, a backfill over their slots leaves them alone (`removed`, counted with the slots
    that have runs) and creates runs only for the slots before the job existed; repeated, it
    creates nothing."""
    tenant_id, key = await new_tenant(pool)
    first = days_ago(40).replace(second=0, microsecond=0)
    job_id, run_ids = await recurring_runs(pool, tenant_id, first_slot=first,
                                           states=["succeeded", "succeeded", "succeeded"])
    async with pool.acquire() as conn:
        versions = [await stream_version(conn, i) for i in run_ids]
    verdicts = [r["kept_because"] for r in sorted(
        await app.fetch(APP_ROLE_CALL, run_ids, versions),
        key=lambda r: run_ids.index(r["run_id"]))]
    assert verdicts == [None, None, "latest_success_of_job"]
    body = {"start": (first - timedelta(minutes=2)).isoformat(),
            "end": (first + timedelta(minutes=3)).isoformat()}

    async def backfill(dry_run: bool) -> dict:
        r = await client.post(f"/v1/jobs/{job_id}/backfill", json={**body, "dry_run": dry_run},
                              headers=auth(key))
        assert r.status_code == 200, r.text
        return r.json()

    plan = await backfill(dry_run=True)
    assert [s["action"] for s in plan["slots"]] == [
        "create", "create", "removed", "removed", "has_run"]
    assert (plan["runs_created"], plan["slots_with_runs"]) == (2, 3)
    done = await backfill(dry_run=False)
    assert [s["action"] for s in done["slots"]] == [s["action"] for s in plan["slots"]]
    again = await backfill(dry_run=False)
    assert again["runs_created"] == 0
    async with pool.acquire() as conn:
        slots = [r["scheduled_for"] for r in await conn.fetch(
            "SELECT scheduled_for FROM runs WHERE job_id = $1 ORDER BY 1", job_id)]
    assert slots == [first - timedelta(minutes=2), first - timedelta(minutes=1),
                     first + timedelta(minutes=2)]
