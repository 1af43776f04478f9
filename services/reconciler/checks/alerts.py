"""Alerts that reach people (docs/ALERTS.md): two duties of the reconciler.

`evaluate_alerts` reads every rule's signals (ostinato.stores.alerts), decides with the pure
`ostinato.alerts.transitions` what fires and what resolves, and records both in one
transaction: the alert's state row (a key firing already is not fired again, and a second
reconciler's evaluation finds the episode taken) and one delivery row per sink — a firing to
the sinks its job's owner routes to (the tenant's default sinks otherwise), a resolution to the
sinks its firing went to. Signals that already exist elsewhere as events and alert lines
(dead letters, CompletionOverdue, LedgerSlotMissing, LedgerDisagreement, RunStuck, auto-pause)
are the inputs, and so is the fleet's state seen per tenant, judged against
`ostinato.alerts.Thresholds`: leases expired and not taken over, schedule lag p99 per pool over
its SLO, outbox messages waiting, runs waiting in a pool no live worker serves. The pool-wide
ones have no job and so no owner: they go to the tenant's default sinks.

`deliver_alerts` is the delivery outbox's relay: it locks due deliveries (SKIP LOCKED), posts
one Alertmanager webhook body (version 4) per (sink, group key), marks them delivered on a 2xx
and otherwise retries them with backoff (1 s doubling to 5 min), so a sink that is down loses
nothing. A crash between the sink's answer and the commit sends that body again: delivery is
at least once, and the group key and fingerprint let a receiver (Alertmanager does) drop it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

import asyncpg
import httpx
import msgspec

from ostinato import alerts, workers
from ostinato.alerts import Signal, Sink, Thresholds
from ostinato.alerts.conditions import DEFAULT as DEFAULT_THRESHOLDS
from ostinato.alerts.payload import alert_object
from ostinato.clock import Clock
from ostinato.eventlog import outbox
from ostinato.leases import attempts as attempt_leases
from ostinato.policy.storage import alerting
from ostinato.stores import alerts as alert_store
from ostinato.stores import archive as archive_store
from ostinato.stores import storage as storage_store
from ostinato.stores import tenants as tenant_store
from ostinato.stores.alerts import DueDelivery
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger
from services.reconciler.checks.archive import archive_signals
from services.reconciler.checks.storage import storage_signals

log = get_logger("ostinato.reconciler")
_json = msgspec.json.Encoder()
SIGNAL_LIMIT = 10_000  # per rule and evaluation; more would be one rule's flood anyway
_reported: set[tuple[str, str]] = set()  # ALERTS_FIRING label sets last time: zeroed when clear


def _job(tenant_id: uuid.UUID, tenant: str, job_id: uuid.UUID, job: str | None,
         **extra: str) -> dict[str, str]:
    return {"tenant": tenant, "tenant_id": str(tenant_id), "job": job or str(job_id),
            "job_id": str(job_id), **extra}


def _pool(tenant_id: uuid.UUID, tenant: str, pool: str) -> dict[str, str]:
    return {"tenant": tenant, "tenant_id": str(tenant_id), "pool": pool}


async def read_signals(conn: asyncpg.Connection, now: datetime, *,
                       db_now: datetime | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                       worker_ttl: timedelta = timedelta(seconds=35),
                       ) -> tuple[list[Signal], set[str]]:
    """Every rule's signals now, every tenant, and the rules evaluated in full: a rule whose
    query hit SIGNAL_LIMIT may have left signals out, so it resolves nothing this time.
    `db_now` (None: the database's own clock) judges leases, the outbox and waiting runs."""
    out: list[Signal] = []
    partial: set[str] = set()
    t = thresholds
    letters = await alert_store.dead_letters(conn, SIGNAL_LIMIT)
    findings = await alert_store.job_findings(conn, SIGNAL_LIMIT)
    stale = await alert_store.stale_jobs(conn, now, SIGNAL_LIMIT)
    stuck = await alert_store.stuck_runs(conn, SIGNAL_LIMIT)
    paused = await alert_store.auto_paused(conn, SIGNAL_LIMIT)
    leases = await attempt_leases.stuck_leases(conn, db_now, t.lease_stuck_after, SIGNAL_LIMIT)
    lags = await alert_store.lag_by_pool(conn, alerts.cutoff(now, t.lag_window), now,
                                         SIGNAL_LIMIT)
    backlog = await outbox.waiting_by_tenant(conn, db_now, t.outbox_after, SIGNAL_LIMIT)
    unserved = await workers.unserved(conn, db_now, t.no_worker_after, worker_ttl, SIGNAL_LIMIT)
    disagree = await alert_store.ledger_disagreements(
        conn, alerts.cutoff(now, t.disagreement_window), SIGNAL_LIMIT)
    stored = await storage_store.read(conn)
    archiving = await archive_store.health(conn)
    archive_failing = bool(archiving and archiving.failing_seconds is not None
                           and archiving.failing_seconds >= t.archive_failing_after.total_seconds())
    tenants = (await tenant_store.weights(conn)
               if (stored and alerting(stored.level)) or archive_failing else [])
    for rows, rules in ((letters, ("OstinatoDeadLetter",)),
                        (findings, ("OstinatoCompletionOverdue", "OstinatoOccurrenceOmitted")),
                        (stale, ("OstinatoCompletionOverdue",)), (stuck, ("OstinatoRunStuck",)),
                        (paused, ("OstinatoJobAutoPaused",)), (leases, ("OstinatoLeaseStuck",)),
                        (lags, ("OstinatoLagSLOBreach",)), (backlog, ("OstinatoOutboxBacklog",)),
                        (unserved, ("OstinatoNoWorkerForPool",)),
                        (disagree, ("OstinatoLedgerDisagreement",)),
                        (tenants, ("OstinatoDatabaseFilling", "OstinatoNewWorkRefused",
                                   "OstinatoArchiveFailing"))):
        if len(rows) >= SIGNAL_LIMIT:
            partial.update(rules)
    for d in letters:
        out.append(Signal("OstinatoDeadLetter", str(d.tenant_id),
                          _job(d.tenant_id, d.tenant, d.job_id, d.job), d.owner,
                          {"dead_letters": str(d.n), "since": d.since.isoformat(),
                           "runbook": "GET /v1/dead-letters?job_id=" + str(d.job_id)}))
    for f in findings:
        ok = f.succeeded_slot
        if f.last_overdue_slot is not None and (ok is None or ok < f.last_overdue_slot):
            out.append(Signal("OstinatoCompletionOverdue", str(f.tenant_id),
                              _job(f.tenant_id, f.tenant, f.job_id, f.job,
                                   kind="complete_within"), f.owner,
                              {"slot": f.last_overdue_slot.isoformat()}))
        if f.last_missing_slot is not None and (ok is None or ok < f.last_missing_slot):
            out.append(Signal("OstinatoOccurrenceOmitted", str(f.tenant_id),
                              _job(f.tenant_id, f.tenant, f.job_id, f.job), f.owner,
                              {"slot": f.last_missing_slot.isoformat()}))
    for s in stale:
        last = s.last_success_at.isoformat() if s.last_success_at else "never"
        out.append(Signal("OstinatoCompletionOverdue", str(s.tenant_id),
                          _job(s.tenant_id, s.tenant, s.job_id, s.job, kind="max_staleness"),
                          s.owner, {"last_success": last}))
    for r in stuck:
        out.append(Signal("OstinatoRunStuck", str(r.tenant_id),
                          _job(r.tenant_id, r.tenant, r.job_id, r.job), r.owner,
                          {"stuck_runs": str(r.n)}))
    for p in paused:
        out.append(Signal("OstinatoJobAutoPaused", str(p.tenant_id),
                          _job(p.tenant_id, p.tenant, p.job_id, p.job), p.owner,
                          {"runbook": f"POST /v1/jobs/{p.job_id}/resume"}))
    for sl in leases:
        out.append(Signal("OstinatoLeaseStuck", str(sl.tenant_id),
                          _job(sl.tenant_id, sl.tenant, sl.job_id, sl.job), sl.owner,
                          {"stuck_leases": str(sl.n), "expired_at": sl.since.isoformat(),
                           "runbook": "GET /readyz of the reconciler; its reconcile_leases "
                                      "duty"}))
    for g in lags:
        if alerts.lag_breached(g.p99_seconds, g.n, t):
            out.append(Signal("OstinatoLagSLOBreach", str(g.tenant_id),
                              _pool(g.tenant_id, g.tenant, g.pool), None,
                              {"lag_p99_seconds": f"{g.p99_seconds:.3f}", "starts": str(g.n),
                               "slo_seconds": f"{t.lag_slo.total_seconds():g}",
                               "window": f"{t.lag_window.total_seconds():g}s"}))
    for b in backlog:
        out.append(Signal("OstinatoOutboxBacklog", str(b.tenant_id),
                          {"tenant": b.tenant, "tenant_id": str(b.tenant_id)}, None,
                          {"messages": str(b.n), "oldest": b.since.isoformat()}))
    for u in unserved:
        out.append(Signal("OstinatoNoWorkerForPool", str(u.tenant_id),
                          _pool(u.tenant_id, u.tenant, u.pool), None,
                          {"waiting_runs": str(u.n), "since": u.since.isoformat(),
                           "runbook": f"start a worker for pool {u.pool} (GET /v1/workers)"}))
    for d in disagree:
        out.append(Signal("OstinatoLedgerDisagreement", str(d.tenant_id),
                          _job(d.tenant_id, d.tenant, d.job_id, d.job), d.owner,
                          {"disagreements": str(d.n), "last": d.last_at.isoformat(),
                           "runbook": f"GET /v1/jobs/{d.job_id}/ledger"}))
    out.extend(storage_signals(stored, tenants[:SIGNAL_LIMIT]))
    out.extend(archive_signals(archiving, tenants[:SIGNAL_LIMIT], t.archive_failing_after))
    return out, set(alerts.RULES) - partial


async def evaluate_alerts(pool: asyncpg.Pool, clock: Clock, *,
                          thresholds: Thresholds = DEFAULT_THRESHOLDS,
                          worker_ttl: timedelta = timedelta(seconds=35)) -> int:
    """One evaluation; returns how many alerts fired or resolved."""
    now = clock.now()
    async with pool.acquire() as conn, conn.transaction():
        signals, evaluated = await read_signals(conn, now, db_now=clock.db_now(),
                                                thresholds=thresholds, worker_ttl=worker_ttl)
        current = [alerts.Current(str(a.tenant_id), a.alert_key, a.rule)
                   for a in await alert_store.firing(conn)]
        changes = alerts.transitions(current, signals, evaluated=evaluated)
        tenants = sorted({uuid.UUID(t.tenant_id) for t in changes})
        sinks: dict[str, list[Sink]] = defaultdict(list)
        for s in await alert_store.sinks_for_routing(conn, tenants) if tenants else []:
            sinks[str(s.tenant_id)].append(Sink(s.name, tuple(s.owners), s.is_default))
        done = 0
        for t in changes:
            done += await (_fire(conn, t, sinks[t.tenant_id], now) if t.status == "firing"
                           else _resolve(conn, t, now))
    _gauge(signals)
    return done


async def _fire(conn: asyncpg.Connection, t: alerts.Transition, sinks: list[Sink],
                now: datetime) -> int:
    s = t.signal
    assert s is not None
    labels, annotations = s.all_labels(), s.all_annotations()
    tenant_id = uuid.UUID(t.tenant_id)
    starts = await alert_store.fire(conn, tenant_id, t.key, s.rule, s.group_key, s.owner,
                                    labels, annotations, now)
    if starts is None:  # another evaluation fired this episode first
        return 0
    targets = alerts.route(s.owner, sinks)
    body = alert_object("firing", labels, annotations, starts, None)
    await alert_store.enqueue(conn, tenant_id, t.key, s.group_key, "firing", starts, body, now,
                              targets)
    log.error("alert firing", tenant_id=t.tenant_id, rule=s.rule, key=t.key,
              job_id=s.labels.get("job_id"), owner=s.owner, sinks=targets, alert=s.rule)
    return 1


async def _resolve(conn: asyncpg.Connection, t: alerts.Transition, now: datetime) -> int:
    tenant_id = uuid.UUID(t.tenant_id)
    row = await alert_store.resolve(conn, tenant_id, t.key, now)
    if row is None:
        return 0
    targets = await alert_store.sinks_of_firing(conn, tenant_id, t.key, row.starts_at)
    labels = row.labels
    body = alert_object("resolved", labels, row.annotations, row.starts_at, now)
    await alert_store.enqueue(conn, tenant_id, t.key, row.group_key, "resolved", row.starts_at,
                              body, now, targets)
    log.info("alert resolved", tenant_id=t.tenant_id, key=t.key, sinks=targets,
             rule=labels.get("alertname"))
    return 1


def _gauge(signals: Iterable[Signal]) -> None:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for s in signals:
        counts[metrics.tenant_label(s.tenant_id), s.rule] += 1
    for tenant, rule in _reported - set(counts):
        metrics.ALERTS_FIRING.labels(tenant=tenant, rule=rule).set(0)
    _reported.clear()
    for (tenant, rule), n in counts.items():
        _reported.add((tenant, rule))
        metrics.ALERTS_FIRING.labels(tenant=tenant, rule=rule).set(n)


async def deliver_alerts(pool: asyncpg.Pool, clock: Clock, client: httpx.AsyncClient, *,
                         batch_size: int = 500) -> int:
    """Deliver what is due; returns how many notifications were delivered."""
    now = clock.now()
    async with pool.acquire() as conn, conn.transaction():
        rows = await alert_store.due(conn, now, batch_size)
        groups = alerts.group_notifications((r.sink_name, r.group_key, r) for r in rows)
        results = await asyncio.gather(*(_post(client, sink, key, items)
                                         for (sink, key), items in groups.items()))
        delivered = 0
        for items, error in zip(groups.values(), results, strict=True):
            ids = [r.id for r in items]
            if error is None:
                await alert_store.delivered(conn, ids, now)
                delivered += len(ids)
                metrics.ALERT_DELIVERIES.labels(outcome="delivered").inc(len(ids))
            else:
                wait = alerts.backoff(max(r.attempts for r in items) + 1)
                await alert_store.failed(conn, ids, error, now + wait)
                metrics.ALERT_DELIVERIES.labels(outcome="failed").inc(len(ids))
                log.warning("alert sink failed; retrying", tenant_id=str(items[0].tenant_id),
                            sink=items[0].sink_name, error=error,
                            retry_in_seconds=wait.total_seconds())
        metrics.ALERT_DELIVERIES_PENDING.set(await alert_store.pending(conn))
    return delivered


async def _post(client: httpx.AsyncClient, sink: str, group_key: str,
                items: Sequence[DueDelivery]) -> str | None:
    """POST one group's body; None on a 2xx, else what went wrong."""
    first = items[0]
    body = alerts.webhook_body(sink, group_key, [r.alert for r in items])
    headers = {"content-type": "application/json"}
    if first.secret_header and first.secret_value:
        headers[first.secret_header] = first.secret_value
    try:
        answer = await client.post(first.url, content=_json.encode(body), headers=headers)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"[:500]
    if 200 <= answer.status_code < 300:
        return None
    return f"HTTP {answer.status_code}"
