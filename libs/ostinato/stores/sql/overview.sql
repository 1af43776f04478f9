-- The web UI's overview page (services/api/ui/overview.py, ostinato.policy.overview): a
-- tenant's figures per pool in four set-based reads, each on an index that bounds it by the
-- tenant and a window (docs/UI.md "Overview" has their plans on a tenant with many runs).

-- name: overview_live_runs
-- The tenant's runs not yet final per pool and state, and the oldest due instant among those
-- waiting to start (a retry's due is its retry_at; once due, the dispatcher clears it and the
-- run waits since its last change). The predicate is the partial index runs_task_versions'
-- (tenant_id leading): the tenant's live runs are read, never its finished ones.
SELECT pool, state, count(*)::int AS runs,
       min(CASE WHEN state = 'retry_scheduled' THEN coalesce(retry_at, updated_at)
                ELSE coalesce(due_at, scheduled_for) END)
           FILTER (WHERE state IN ('scheduled', 'queued', 'retry_scheduled')) AS oldest_due
FROM runs
WHERE tenant_id = $1 AND state <> ALL (ARRAY['succeeded', 'dead_lettered', 'cancelled'])
GROUP BY pool, state
ORDER BY pool, state;

-- name: overview_ended_hours
-- The tenant's runs that ended since $2 (a day) per pool and hour (UTC): ended, dead-lettered,
-- and ended after a failed attempt (the retry policy's count) or dead-lettered. The predicate
-- and the range are the partial index runs_ended's (tenant_id, finished_at): that day's ends
-- only.
SELECT pool, date_trunc('hour', finished_at, 'UTC') AS hour, count(*)::int AS ended,
       count(*) FILTER (WHERE state = 'dead_lettered')::int AS dead_lettered,
       count(*) FILTER (WHERE failures > 0 OR state = 'dead_lettered')::int AS failed
FROM runs
WHERE tenant_id = $1 AND state = ANY (ARRAY['succeeded', 'dead_lettered', 'cancelled'])
  AND finished_at >= $2
GROUP BY pool, hour
ORDER BY pool, hour;

-- name: overview_lag_buckets
-- The tenant's schedule-lag histogram of the $3 minutes from the minute $2 (the RunStarted
-- projection's start_lag_minutes, migration 0036): a few rows per pool and minute however many
-- runs started. Its key leads with the minute, so a range of minutes holds every tenant's rows
-- of the hour (a parallel seq scan of them all: 66 ms with 200 other tenants); the minutes
-- named one by one make it one probe of the key per (minute, tenant): 7.4 ms, as fast as an
-- index on (tenant_id, minute) and with none to write on the claim path (bench/README.md
-- `ui_overview`).
SELECT pool, minute, bucket::int AS bucket, starts, max_seconds
FROM start_lag_minutes
WHERE minute = ANY (ARRAY(SELECT generate_series($2::timestamptz,
                                                 $2::timestamptz + ($3 - 1) * interval '1 minute',
                                                 interval '1 minute')))
  AND tenant_id = $1
ORDER BY pool, minute, bucket;

-- name: overview_alerts
-- The tenant's alerts firing now or whose latest episode started or ended since $2 (its keys,
-- by the primary key's tenant_id), newest first, at most $3.
SELECT alert_key, rule, status, labels ->> 'pool' AS pool, labels ->> 'severity' AS severity,
       annotations ->> 'summary' AS summary, starts_at, ends_at
FROM alert_states
WHERE tenant_id = $1 AND (status = 'firing' OR starts_at >= $2 OR ends_at >= $2)
ORDER BY status <> 'firing', starts_at DESC, alert_key
LIMIT $3;
