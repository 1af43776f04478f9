-- Signals: what the alert rules (ostinato.alerts.rules) fire on, every tenant at once.

-- name: alert_dead_letters
-- OstinatoDeadLetter: jobs with dead letters not triaged yet.
SELECT d.tenant_id, t.name AS tenant, d.job_id, coalesce(j.name, d.task) AS job, j.owner,
       count(*)::int AS n, min(d.dead_lettered_at) AS since
FROM dead_letters d
JOIN tenants t ON t.id = d.tenant_id
LEFT JOIN jobs j ON j.id = d.job_id
WHERE d.triage_state = 'new'
GROUP BY d.tenant_id, t.name, d.job_id, coalesce(j.name, d.task), j.owner
ORDER BY d.tenant_id, d.job_id
LIMIT $1;

-- name: alert_job_findings
-- OstinatoCompletionOverdue / OstinatoOccurrenceOmitted: jobs whose latest overdue or missing
-- slot is later than their latest succeeded run's slot (a DAG job's: its latest succeeded DAG
-- run's, a node's success is not the job's; none: never succeeded).
SELECT j.tenant_id, t.name AS tenant, j.id AS job_id, j.name AS job, j.owner,
       j.last_missing_slot, j.last_overdue_slot, s.succeeded_slot
FROM jobs j
JOIN tenants t ON t.id = j.tenant_id
LEFT JOIN LATERAL (SELECT max(scheduled_for) AS succeeded_slot FROM (  -- a DAG job's: DAG runs
                       SELECT scheduled_for FROM runs
                       WHERE runs.job_id = j.id AND runs.state = 'succeeded'
                         AND runs.trigger <> 'dag'
                       UNION ALL
                       SELECT scheduled_for FROM dag_runs
                       WHERE dag_runs.job_id = j.id AND dag_runs.state = 'succeeded'
                   ) AS successes) AS s ON true
WHERE (j.last_missing_slot IS NOT NULL OR j.last_overdue_slot IS NOT NULL)
  AND j.status <> 'deleted'
  AND (s.succeeded_slot IS NULL OR s.succeeded_slot < greatest(j.last_missing_slot,
                                                               j.last_overdue_slot))
ORDER BY j.tenant_id, j.id
LIMIT $1;

-- name: alert_stale_jobs
-- OstinatoCompletionOverdue (kind max_staleness): active recurring jobs whose last success
-- (none: their creation) is older than their max_staleness at $1.
SELECT j.tenant_id, t.name AS tenant, j.id AS job_id, j.name AS job, j.owner,
       s.last_success_at
FROM jobs j
JOIN tenants t ON t.id = j.tenant_id
LEFT JOIN LATERAL (SELECT max(finished_at) AS last_success_at FROM (  -- a DAG job's: DAG runs
                       SELECT finished_at FROM runs
                       WHERE runs.job_id = j.id AND runs.state = 'succeeded'
                         AND runs.trigger <> 'dag'
                       UNION ALL
                       SELECT finished_at FROM dag_runs
                       WHERE dag_runs.job_id = j.id AND dag_runs.state = 'succeeded'
                   ) AS successes) AS s ON true
WHERE j.max_staleness_seconds IS NOT NULL AND j.status = 'active'
  AND coalesce(s.last_success_at, j.created_at)
          + make_interval(secs => j.max_staleness_seconds) < $1
ORDER BY j.tenant_id, j.id
LIMIT $2;

-- name: alert_stuck_runs
-- OstinatoRunStuck: runs whose last event is their RunStuck (nothing happened since), by job.
SELECT r.tenant_id, t.name AS tenant, r.job_id, j.name AS job, j.owner, count(*)::int AS n
FROM runs r
JOIN tenants t ON t.id = r.tenant_id
LEFT JOIN jobs j ON j.id = r.job_id
WHERE r.stuck_version IS NOT NULL AND r.stuck_version = r.version
GROUP BY r.tenant_id, t.name, r.job_id, j.name, j.owner
ORDER BY r.tenant_id, r.job_id
LIMIT $1;

-- name: alert_auto_paused
-- OstinatoJobAutoPaused: jobs paused by the scheduler after repeated failures.
SELECT j.tenant_id, t.name AS tenant, j.id AS job_id, j.name AS job, j.owner
FROM jobs j
JOIN tenants t ON t.id = j.tenant_id
WHERE j.status = 'paused'
  AND EXISTS (SELECT FROM job_pauses p
              WHERE p.job_id = j.id AND p.resumed_at IS NULL AND p.reason LIKE 'auto-paused%')
ORDER BY j.tenant_id, j.id
LIMIT $1;

-- name: alert_lag_by_pool
-- OstinatoLagSLOBreach: per (tenant, pool), how many runs' first attempts started in the whole
-- minutes from the one holding $1 to $2 (the window starts up to a minute early), and their
-- schedule lag's p99, from the histogram the RunStarted projection keeps (start_lag_minutes,
-- migration 0036): a few rows per minute, however many runs started. The p99 is the largest
-- lag of the first bucket (ascending) whose cumulative count reaches ceil(0.99 * n), the bucket
-- of the nearest-rank p99: the upper edge of that p99 within one bucket's width (under 10 %
-- above it; under 1 ms in bucket 0), exact when the bucket's lags are equal.
WITH buckets AS (
    SELECT tenant_id, pool, bucket, sum(starts) AS starts, max(max_seconds) AS max_seconds
    FROM start_lag_minutes
    WHERE minute >= date_trunc('minute', $1::timestamptz, 'UTC') AND minute <= $2
    GROUP BY tenant_id, pool, bucket
), walked AS (
    SELECT tenant_id, pool, bucket, max_seconds,
           sum(starts) OVER (PARTITION BY tenant_id, pool ORDER BY bucket) AS reached,
           sum(starts) OVER (PARTITION BY tenant_id, pool) AS n
    FROM buckets
)
SELECT DISTINCT ON (w.tenant_id, w.pool) w.tenant_id, t.name AS tenant, w.pool, w.n::int AS n,
       w.max_seconds AS p99_seconds
FROM walked w
JOIN tenants t ON t.id = w.tenant_id
WHERE w.reached >= ceil(0.99 * w.n)
ORDER BY w.tenant_id, w.pool, w.bucket
LIMIT $3;

-- name: alert_ledger_disagreements
-- OstinatoLedgerDisagreement: jobs with a LedgerDisagreement recorded since $1.
SELECT e.tenant_id, t.name AS tenant, e.stream_id AS job_id, j.name AS job, j.owner,
       count(*)::int AS n, max(e.occurred_at) AS last_at
FROM events e
JOIN tenants t ON t.id = e.tenant_id
JOIN jobs j ON j.id = e.stream_id
WHERE e.type = 'LedgerDisagreement' AND e.occurred_at >= $1 AND j.status <> 'deleted'
GROUP BY e.tenant_id, t.name, e.stream_id, j.name, j.owner
ORDER BY e.tenant_id, e.stream_id
LIMIT $2;

-- State: one row per alert key.

-- name: alerts_firing
-- Every firing alert (the evaluation resolves those whose signal is gone).
SELECT tenant_id, alert_key, rule FROM alert_states WHERE status = 'firing';

-- name: alert_fire
-- A new episode: a key never seen, or resolved before; a key firing already returns nothing.
INSERT INTO alert_states (tenant_id, alert_key, rule, group_key, owner, labels, annotations,
                          status, starts_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'firing', $8, $8)
ON CONFLICT (tenant_id, alert_key) DO UPDATE
    SET status = 'firing', rule = excluded.rule, group_key = excluded.group_key,
        owner = excluded.owner, labels = excluded.labels, annotations = excluded.annotations,
        starts_at = excluded.starts_at, ends_at = NULL, updated_at = excluded.updated_at
    WHERE alert_states.status = 'resolved'
RETURNING starts_at;

-- name: alert_resolve
-- The end of an episode; nothing when another evaluation resolved it first.
UPDATE alert_states SET status = 'resolved', ends_at = $3, updated_at = $3
WHERE tenant_id = $1 AND alert_key = $2 AND status = 'firing'
RETURNING group_key, labels, annotations, starts_at;

-- name: alert_states_of_tenant
-- GET /v1/alerts: a tenant's alerts, firing first, newest first.
SELECT alert_key, rule, status, owner, labels, annotations,
       starts_at, ends_at
FROM alert_states WHERE tenant_id = $1
ORDER BY status = 'resolved', starts_at DESC, alert_key
LIMIT $2;

-- Sinks.

-- name: sink_put
-- PUT /v1/alert-sinks/{name}: create or replace.
INSERT INTO alert_sinks (tenant_id, name, url, secret_header, secret_value, owners, is_default,
                         created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6::text[], $7, $8, $8)
ON CONFLICT (tenant_id, name) DO UPDATE
    SET url = excluded.url, secret_header = excluded.secret_header,
        secret_value = excluded.secret_value, owners = excluded.owners,
        is_default = excluded.is_default, updated_at = excluded.updated_at
RETURNING name, url, secret_header, owners, is_default, created_at, updated_at;

-- name: sinks_of_tenant
-- GET /v1/alert-sinks (never the secret's value).
SELECT name, url, secret_header, owners, is_default, created_at, updated_at
FROM alert_sinks WHERE tenant_id = $1 ORDER BY name;

-- name: sink_delete
-- DELETE /v1/alert-sinks/{name}: the sink and what still waits for it.
WITH pending AS (DELETE FROM alert_deliveries
                 WHERE tenant_id = $1 AND sink_name = $2 AND delivered_at IS NULL)
DELETE FROM alert_sinks WHERE tenant_id = $1 AND name = $2 RETURNING name;

-- name: sinks_for_routing
-- The evaluation: the sinks of these tenants, for routing.
SELECT tenant_id, name, owners, is_default FROM alert_sinks
WHERE tenant_id = ANY($1::uuid[]);

-- The delivery outbox.

-- name: delivery_enqueue
-- One notification per (sink, episode, status); a repeat is nothing.
INSERT INTO alert_deliveries (tenant_id, sink_name, alert_key, group_key, status, starts_at,
                              alert, next_attempt_at, created_at)
SELECT $1, sink, $2, $3, $4, $5, $6, $7, $7 FROM unnest($8::text[]) AS s(sink)
ON CONFLICT DO NOTHING;

-- name: delivery_sinks_of_firing
-- A resolution goes to the sinks its firing was sent to.
SELECT sink_name FROM alert_deliveries
WHERE tenant_id = $1 AND alert_key = $2 AND starts_at = $3 AND status = 'firing'
ORDER BY sink_name;

-- name: deliveries_due
-- The delivery duty: notifications due now, locked (another reconciler takes others), with
-- where they go.
SELECT d.id, d.tenant_id, d.sink_name, d.group_key, d.alert, d.attempts,
       s.url, s.secret_header, s.secret_value
FROM alert_deliveries d
JOIN alert_sinks s ON s.tenant_id = d.tenant_id AND s.name = d.sink_name
WHERE d.delivered_at IS NULL AND d.next_attempt_at <= $1
ORDER BY d.next_attempt_at, d.id
LIMIT $2
FOR UPDATE OF d SKIP LOCKED;

-- name: deliveries_done
UPDATE alert_deliveries SET delivered_at = $2, attempts = attempts + 1, last_error = NULL
WHERE id = ANY($1::bigint[]);

-- name: deliveries_failed
UPDATE alert_deliveries SET attempts = attempts + 1, last_error = $2, next_attempt_at = $3
WHERE id = ANY($1::bigint[]);

-- name: deliveries_pending
SELECT count(*)::int FROM alert_deliveries WHERE delivered_at IS NULL;
