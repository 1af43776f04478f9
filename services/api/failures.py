"""Route handlers for failure handling: cancel and re-run runs, read their logs, and the
dead-letter queue (list with counts, detail with attempt history, triage, replay)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

import msgspec
from litestar import Response, get, post
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from ostinato import runs, schedules
from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.eventlog.store import get_blobs, read_stream
from ostinato.stores import dead_letters as letters
from ostinato.stores import runs as run_store
from ostinato.stores.dead_letters import DeadLetterRow
from ostinato.wire.api import (
    AttemptView,
    BulkReplayed,
    BulkReplayRequest,
    Cancelled,
    DeadLetterCounts,
    DeadLetterPage,
    DeadLetterView,
    ReplayRequest,
    Rerun,
    RetryRunRequest,
    RunLogs,
    Triaged,
    TriageRequest,
)
from services.api import archived
from services.api.archived import refuses_archived
from services.api.auditing import audited
from services.api.routes import decode_cursor, encode_cursor
from services.api.scope import Tenant

Limit = Annotated[int, QueryParameter(ge=1, le=500)]


@post("/v1/runs/{run_id:uuid}/cancel", status_code=200, tags=["runs"],
      opt=audited("run.cancel", "run", "run_id"))
@refuses_archived
async def cancel(run_id: FromPath[uuid.UUID], tenant: Tenant) -> Cancelled:
    """A waiting run is cancelled at once; a running one is asked to stop at its next safe
    point (it ends `cancelled`; a result that still arrives is kept and ignored). A waiting
    workflow with compensations to run is asked to stop as well (a suspended one is woken):
    it compensates, then ends `cancelled`. Its children are cancelled with it."""
    state = await runs.cancel_run(tenant.conn, tenant.store, tenant_id=tenant.tenant_id,
                                  run_id=run_id, actor=tenant.actor)
    tenant.audit.after = {"state": state}
    return Cancelled(state=state, cancel="done" if state == "cancelled" else "requested")


@post("/v1/runs/{run_id:uuid}/retry", status_code=201, tags=["runs"],
      opt=audited("run.retry", "run", "run_id"))
@refuses_archived
async def retry_run(
    run_id: FromPath[uuid.UUID], tenant: Tenant, data: JSONBody[RetryRunRequest | None] = None,
) -> Response[Rerun]:
    """Re-run a failed, cancelled or dead-lettered run as a new run linked to it."""
    new_id, created = await runs.rerun(
        tenant.conn, tenant.store, tenant.clock, tenant_id=tenant.tenant_id, run_id=run_id,
        actor=tenant.actor, request_key=(data or RetryRunRequest()).request_key)
    tenant.audit.after, tenant.audit.status = {"run_id": str(new_id)}, 201 if created else 200
    return Response(
        Rerun(run_id=new_id, replay_of=run_id, created=created), status_code=201 if created else 200
    )


@get("/v1/runs/{run_id:uuid}/logs", tags=["runs"], opt={"reads_archive": True})
async def run_logs(run_id: FromPath[uuid.UUID], tenant: Tenant) -> RunLogs:
    """The log lines the handler emitted during the run's latest reported attempt. An
    archived run's come from its archive (`archived` true)."""
    run = await run_store.by_id(tenant.conn, tenant.tenant_id, run_id)
    if run is None:
        gone = await archived.read(tenant.archive, tenant.tenant_id, run_id)
        return RunLogs(run_id=run_id, attempt=archived.run_row(gone).attempt,
                       items=archived.logs(gone), archived=True, archived_at=gone.archived_at)
    lines: Any = []  # the stored lines as the gateway wrote them (RunLogLine's shape), as-is
    if run.logs_ref is not None:
        logs = await get_blobs(tenant.conn, [run.logs_ref], tenant.tenant_id)
        lines = logs.get(run.logs_ref, [])
    return RunLogs(run_id=run_id, attempt=run.attempt, items=lines)


def _letter(row: DeadLetterRow, payload: Any = None,
            history: list[AttemptView] | None = None) -> DeadLetterView:
    return DeadLetterView(
        run_id=row.run_id, job_id=row.job_id, task=row.task, reason=row.reason,
        error_type=row.error_type, message=row.message, attempts=row.attempts,
        dead_lettered_at=row.dead_lettered_at, triage_state=row.triage_state,
        triage_by=row.triage_by, triage_comment=row.triage_comment, triaged_at=row.triaged_at,
        replays=row.replays, last_replay_run=row.last_replay_run, payload=payload,
        history=history,
    )


def attempt_history(stream: list[Any]) -> list[AttemptView]:
    """Each attempt's worker, start, end, outcome and error, folded from the run's events."""
    history: list[AttemptView] = []
    for r in stream:
        match r.event:
            case ev.RunStarted(attempt=n, worker_id=worker):
                history.append(
                    AttemptView(
                        attempt=n,
                        worker_id=worker,
                        started_at=r.occurred_at,
                        ended_at=None,
                        outcome="running",
                    )
                )
            case (
                ev.RunSucceeded()
                | ev.RunFailed()
                | ev.AttemptTimedOut()
                | ev.LeaseExpired()
                | ev.LeaseReleased()
                | ev.RunCancelled()
            ) if history and history[-1].ended_at is None:
                last = history[-1]
                last.ended_at, last.outcome = r.occurred_at, r.type
                if isinstance(r.event, ev.RunFailed):
                    last.error = {
                        "type": r.event.error_type,
                        "message": r.event.message,
                        "retryable": r.event.retryable,
                    }
    return history


def _filter(job_id: uuid.UUID | None, error_type: str | None, triage_state: str | None,
            older_than: str | None, now: datetime) -> letters.Filter:
    before = None
    if older_than is not None:
        try:
            before = now - schedules.parse_duration(older_than)
        except ValueError as exc:
            raise InvalidInput(str(exc), [{"field": "older_than", "message": str(exc)}]) from exc
    return letters.Filter(job_id=job_id, error_type=error_type, triage_state=triage_state,
                          dead_lettered_before=before)


@get("/v1/dead-letters", tags=["dead letters"])
async def list_dead_letters(
    tenant: Tenant,
    job_id: FromQuery[uuid.UUID | None] = None,
    error_type: FromQuery[str | None] = None,
    triage_state: FromQuery[str | None] = None,
    older_than: FromQuery[str | None] = None,
    limit: Limit = 50,
    cursor: FromQuery[str | None] = None,
) -> DeadLetterPage:
    """Dead letters, newest first, filtered by job, error type, triage state and age
    (`older_than=1h`), with counts by error type and triage state."""
    where = _filter(job_id, error_type, triage_state, older_than, tenant.clock.now())
    rows = await letters.page(tenant.conn, tenant.tenant_id, where, after=decode_cursor(cursor),
                              limit=limit + 1)
    counts = await letters.counts(tenant.conn, tenant.tenant_id, where)
    more = len(rows) > limit
    rows = rows[:limit]
    by_type: dict[str, int] = {}
    by_state: dict[str, int] = {}
    for c in counts:
        by_type[c.error_type or "none"] = by_type.get(c.error_type or "none", 0) + c.n
        by_state[c.triage_state] = by_state.get(c.triage_state, 0) + c.n
    return DeadLetterPage(
        items=[_letter(r) for r in rows],
        counts=DeadLetterCounts(total=sum(by_state.values()), by_error_type=by_type,
                                by_triage_state=by_state),
        next_cursor=encode_cursor(rows[-1].dead_lettered_at, rows[-1].run_id) if more else None,
    )


@get("/v1/dead-letters/{run_id:uuid}", tags=["dead letters"])
async def get_dead_letter(run_id: FromPath[uuid.UUID], tenant: Tenant) -> DeadLetterView:
    """One dead letter with its payload and full attempt history."""
    row = await letters.by_id(tenant.conn, tenant.tenant_id, run_id)
    if row is None:
        raise NotFound(f"no dead letter {run_id}")
    payloads = await get_blobs(tenant.conn, [row.payload_ref], tenant.tenant_id)
    stream = await read_stream(tenant.conn, run_id, tenant.tenant_id)
    return _letter(row, payloads.get(row.payload_ref), attempt_history(stream))


@post("/v1/dead-letters/{run_id:uuid}/triage", status_code=200, tags=["dead letters"],
      opt=audited("dead_letter.triage", "run", "run_id"))
@refuses_archived
async def triage(
    run_id: FromPath[uuid.UUID], data: JSONBody[TriageRequest], tenant: Tenant
) -> Triaged:
    old = await letters.by_id(tenant.conn, tenant.tenant_id, run_id)
    tenant.audit.before = None if old is None else {"triage_state": old.triage_state}
    tenant.audit.after = {"triage_state": data.state}
    await runs.triage(tenant.conn, tenant.store, tenant_id=tenant.tenant_id, run_id=run_id,
                      state=data.state, comment=data.comment, actor=tenant.actor)
    return Triaged(triage_state=data.state)


@post("/v1/dead-letters/{run_id:uuid}/replay", status_code=201, tags=["dead letters"],
      opt=audited("dead_letter.replay", "run", "run_id"))
@refuses_archived
async def replay(
    run_id: FromPath[uuid.UUID], data: JSONBody[ReplayRequest], tenant: Tenant
) -> Response[Rerun]:
    """Re-run a dead letter as a new linked run, optionally with a corrected payload. Audited
    (`DeadLetterReplayed`: who, the new run, whether the payload changed); idempotent per
    `request_key`."""
    if await letters.by_id(tenant.conn, tenant.tenant_id, run_id) is None:
        raise NotFound(f"no dead letter {run_id}")
    new_id, created = await runs.rerun(
        tenant.conn, tenant.store, tenant.clock, tenant_id=tenant.tenant_id, run_id=run_id,
        actor=tenant.actor, request_key=data.request_key, payload=data.payload,
        max_payload_bytes=tenant.settings.max_payload_bytes, trigger="replay")
    tenant.audit.after = {"run_id": str(new_id),
                          "payload_changed": data.payload is not msgspec.UNSET}
    tenant.audit.status = 201 if created else 200
    return Response(
        Rerun(run_id=new_id, replay_of=run_id, created=created), status_code=201 if created else 200
    )


@post("/v1/dead-letters/replay", status_code=200, tags=["dead letters"],
      opt=audited("dead_letter.replay_many", "run"))
async def bulk_replay(data: JSONBody[BulkReplayRequest], tenant: Tenant) -> BulkReplayed:
    """Replay every dead letter matching the filter (up to `limit`); repeating the same
    `request_key` replays nothing twice."""
    where = letters.Filter(job_id=data.job_id, error_type=data.error_type,
                           triage_state=data.triage_state)
    rows = await letters.page(tenant.conn, tenant.tenant_id, where, limit=data.limit)
    created, existing = await runs.replay_many(
        tenant.conn, tenant.store, tenant.clock, tenant_id=tenant.tenant_id,
        run_ids=[r.run_id for r in rows], actor=tenant.actor, request_key=data.request_key)
    tenant.audit.after = {"matched": len(rows), "replayed": created,
                          "already_replayed": existing}
    return BulkReplayed(matched=len(rows), replayed=created, already_replayed=existing)


ROUTES = [
    cancel,
    retry_run,
    run_logs,
    list_dead_letters,
    get_dead_letter,
    triage,
    replay,
    bulk_replay,
]
