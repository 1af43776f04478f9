-- name: usage_events
-- GET /v1/usage: a tenant's metered events in [$2, $3) by bucket ($4: hour | day, UTC): runs
-- created (RunScheduled), attempts (RunStarted), workflow steps recorded (StepCompleted,
-- StepFailed), worker-seconds: each attempt from its RunStarted to the next event of its run
-- that ends the attempt (its bucket: the start's), and output bytes: the size the completion
-- events record (RunSucceeded, RunCancelled, RunMarkedSucceeded), which outlives the output's
-- blob (outputs expire with retention).
SELECT date_trunc($4, e.occurred_at, 'UTC') AS bucket,
       (count(*) FILTER (WHERE e.type = 'RunScheduled'))::int AS runs,
       (count(*) FILTER (WHERE e.type = 'RunStarted'))::int AS attempts,
       (count(*) FILTER (WHERE e.type IN ('StepCompleted', 'StepFailed')))::int AS workflow_steps,
       coalesce(sum(extract(epoch FROM fin.occurred_at - e.occurred_at))
                    FILTER (WHERE e.type = 'RunStarted'), 0)::float8 AS worker_seconds,
       coalesce(sum((e.data ->> 'output_bytes')::bigint)
                    FILTER (WHERE e.type IN ('RunSucceeded', 'RunCancelled',
                                             'RunMarkedSucceeded')), 0)::bigint AS output_bytes
FROM events e
LEFT JOIN LATERAL (
    SELECT f.occurred_at FROM events f
    WHERE e.type = 'RunStarted' AND f.stream_id = e.stream_id AND f.version > e.version
      AND f.type IN ('RunSucceeded', 'RunFailed', 'AttemptTimedOut', 'LeaseExpired',
                     'LeaseReleased', 'RunSuspended', 'RunCancelled')
    ORDER BY f.version LIMIT 1) AS fin ON true
WHERE e.tenant_id = $1 AND e.occurred_at >= $2 AND e.occurred_at < $3
  AND e.type IN ('RunScheduled', 'RunStarted', 'StepCompleted', 'StepFailed', 'RunSucceeded',
                 'RunCancelled', 'RunMarkedSucceeded')
GROUP BY 1
ORDER BY 1;

-- name: usage_bytes
-- GET /v1/usage: payload bytes a tenant stored in [$2, $3) by bucket (payloads stay for
-- replays; output bytes come from the log, usage_events).
SELECT date_trunc($4, created_at, 'UTC') AS bucket,
       coalesce(sum(size_bytes), 0)::bigint AS payload_bytes
FROM blobs
WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3 AND kind = 'payload'
GROUP BY 1
ORDER BY 1;
