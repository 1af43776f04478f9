-- name: usage_events
-- GET /v1/usage: a tenant's metered events in [$2, $3) by bucket ($4: hour | day, UTC): runs
-- created (RunScheduled), attempts (RunStarted), workflow steps recorded (StepCompleted,
-- StepFailed), and worker-seconds: each attempt from its RunStarted to the next event of its
-- run that ends the attempt (its bucket: the start's).
SELECT date_trunc($4, e.occurred_at, 'UTC') AS bucket,
       (count(*) FILTER (WHERE e.type = 'RunScheduled'))::int AS runs,
       (count(*) FILTER (WHERE e.type = 'RunStarted'))::int AS attempts,
       (count(*) FILTER (WHERE e.type IN ('StepCompleted', 'StepFailed')))::int AS workflow_steps,
       coalesce(sum(extract(epoch FROM fin.occurred_at - e.occurred_at))
                    FILTER (WHERE e.type = 'RunStarted'), 0)::float8 AS worker_seconds
FROM events e
LEFT JOIN LATERAL (
    SELECT f.occurred_at FROM events f
    WHERE e.type = 'RunStarted' AND f.stream_id = e.stream_id AND f.version > e.version
      AND f.type IN ('RunSucceeded', 'RunFailed', 'AttemptTimedOut', 'LeaseExpired',
                     'LeaseReleased', 'RunSuspended', 'RunCancelled')
    ORDER BY f.version LIMIT 1) AS fin ON true
WHERE e.tenant_id = $1 AND e.occurred_at >= $2 AND e.occurred_at < $3
  AND e.type IN ('RunScheduled', 'RunStarted', 'StepCompleted', 'StepFailed')
GROUP BY 1
ORDER BY 1;

-- name: usage_bytes
-- GET /v1/usage: bytes a tenant stored in [$2, $3) by bucket: submitted payloads and run
-- outputs (outputs expire with retention; their bytes are gone with them).
SELECT date_trunc($4, created_at, 'UTC') AS bucket,
       coalesce(sum(size_bytes) FILTER (WHERE kind = 'payload'), 0)::bigint AS payload_bytes,
       coalesce(sum(size_bytes) FILTER (WHERE kind = 'output'), 0)::bigint AS output_bytes
FROM blobs
WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3 AND kind IN ('payload', 'output')
GROUP BY 1
ORDER BY 1;
