-- name: usage_events
-- GET /v1/usage: a tenant's metered events in [$2, $3) by bucket ($4: hour | day, UTC): runs
-- created (RunScheduled), attempts (RunStarted), workflow steps recorded (StepCompleted,
-- StepFailed), worker-seconds: each attempt from its RunStarted to the next event of its run
-- that ends the attempt (its bucket: the start's), and output bytes: the size the completion
-- events record (RunSucceeded, RunCancelled, RunMarkedSucceeded), which outlives the output's
-- blob (outputs expire with retention). Plus what runs removed by retention counted
-- (usage_carried, by UTC hour, written by migration 0046's procedure as it removes them).
SELECT bucket, sum(runs)::int AS runs, sum(attempts)::int AS attempts,
       sum(workflow_steps)::int AS workflow_steps, sum(worker_seconds)::float8 AS worker_seconds,
       sum(output_bytes)::bigint AS output_bytes
FROM (
    SELECT date_trunc($4, e.occurred_at, 'UTC') AS bucket,
           count(*) FILTER (WHERE e.type = 'RunScheduled') AS runs,
           count(*) FILTER (WHERE e.type = 'RunStarted') AS attempts,
           count(*) FILTER (WHERE e.type IN ('StepCompleted', 'StepFailed')) AS workflow_steps,
           coalesce(sum(extract(epoch FROM fin.occurred_at - e.occurred_at))
                        FILTER (WHERE e.type = 'RunStarted'), 0)::float8 AS worker_seconds,
           coalesce(sum((e.data ->> 'output_bytes')::bigint)
                        FILTER (WHERE e.type IN ('RunSucceeded', 'RunCancelled',
                                                 'RunMarkedSucceeded')), 0) AS output_bytes
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
    UNION ALL
    SELECT date_trunc($4, c.hour, 'UTC'), c.runs, c.attempts, c.workflow_steps,
           c.worker_seconds, c.output_bytes
    FROM usage_carried c
    WHERE c.tenant_id = $1 AND c.hour >= date_trunc('hour', $2::timestamptz, 'UTC')
      AND c.hour < $3
      AND (c.runs, c.attempts, c.workflow_steps, c.output_bytes) <> (0, 0, 0, 0)
) AS u
GROUP BY bucket
ORDER BY bucket;

-- name: usage_bytes
-- GET /v1/usage: payload bytes a tenant stored in [$2, $3) by bucket (payloads stay for
-- replays; output bytes come from the log, usage_events), with those of payloads removed with
-- their runs by retention (usage_carried).
SELECT bucket, sum(payload_bytes)::bigint AS payload_bytes
FROM (
    SELECT date_trunc($4, created_at, 'UTC') AS bucket, size_bytes::bigint AS payload_bytes
    FROM blobs
    WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3 AND kind = 'payload'
    UNION ALL
    SELECT date_trunc($4, c.hour, 'UTC'), c.payload_bytes
    FROM usage_carried c
    WHERE c.tenant_id = $1 AND c.hour >= date_trunc('hour', $2::timestamptz, 'UTC')
      AND c.hour < $3 AND c.payload_bytes <> 0
) AS u
GROUP BY bucket
ORDER BY bucket;
