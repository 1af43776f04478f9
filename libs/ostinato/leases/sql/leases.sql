-- The only SQL for attempt_leases. Expiry is always computed by the database clock
-- (coalesce($now, now()) lets tests pin it).

-- name: grant_leases
-- A claim grants (or replaces) each run's lease with its new, higher fencing token.
-- `was_live` reports a lease that had not expired yet: a duplicate claim, which must never
-- happen (a queued run has no live lease) and is counted if it does.
WITH live AS (
    SELECT run_id FROM attempt_leases
    WHERE run_id = ANY($1::uuid[]) AND expires_at > coalesce($5::timestamptz, now())
)
INSERT INTO attempt_leases (run_id, tenant_id, fencing_token, worker_id, expires_at)
SELECT r, t, f, $4, coalesce($5::timestamptz, now()) + $6::interval
FROM unnest($1::uuid[], $2::uuid[], $3::bigint[]) AS x(r, t, f)
ON CONFLICT (run_id) DO UPDATE
    SET tenant_id = excluded.tenant_id, fencing_token = excluded.fencing_token,
        worker_id = excluded.worker_id, expires_at = excluded.expires_at,
        step_seq = NULL, step_name = NULL, step_started_at = NULL
RETURNING run_id, expires_at, run_id IN (SELECT run_id FROM live) AS was_live;

-- name: extend_leases_if_token
-- Heartbeat: extend only leases whose token is current; a stale token extends nothing.
-- $3: the worker's tenant, or NULL for a shared worker (admin key) serving every tenant.
UPDATE attempt_leases AS l
SET expires_at = coalesce($4::timestamptz, now()) + $5::interval
FROM unnest($1::uuid[], $2::bigint[]) AS x(r, f)
WHERE l.run_id = x.r AND l.fencing_token = x.f AND ($3::uuid IS NULL OR l.tenant_id = $3::uuid)
RETURNING l.run_id, l.expires_at;

-- name: step_started
-- A workflow's step began executing (the SDK says so in its next batch): kept on the attempt's
-- lease under its current token (a stale token writes nothing), since the database clock ($6;
-- NULL: now()) less the step's age in ms ($5, by the worker's monotonic clock: no host's wall
-- clock is trusted), never moving back to an earlier position. $7: the worker's tenant, or
-- NULL for a shared worker.
UPDATE attempt_leases AS l
SET step_seq = x.s, step_name = x.n,
    step_started_at = coalesce($6::timestamptz, now()) - make_interval(secs => x.ms / 1000.0)
FROM unnest($1::uuid[], $2::bigint[], $3::int[], $4::text[], $5::float8[]) AS x(r, f, s, n, ms)
WHERE l.run_id = x.r AND l.fencing_token = x.f AND ($7::uuid IS NULL OR l.tenant_id = $7::uuid)
  AND (l.step_seq IS NULL OR l.step_seq <= x.s);

-- name: running_steps
-- The step each of a tenant's running workflow runs is executing: the one its attempt said
-- it began, at a position the run has not recorded yet (a recorded one is done).
SELECT l.run_id, l.step_seq AS seq, l.step_name AS name, l.step_started_at AS since
FROM attempt_leases l
JOIN runs r ON r.id = l.run_id AND r.tenant_id = l.tenant_id
WHERE l.run_id = ANY($1::uuid[]) AND l.tenant_id = $2 AND l.step_seq IS NOT NULL
  AND r.state = 'running' AND r.fencing_token = l.fencing_token
  AND l.step_seq >= r.steps_done;

-- name: current_tokens
-- The current token of each leased run (to tell a stale writer from an unknown run).
SELECT run_id, fencing_token, worker_id FROM attempt_leases
WHERE run_id = ANY($1::uuid[]) AND tenant_id = $2;

-- name: leases_of_worker
-- The leases in a worker's name ($2 NULL: a shared worker, every tenant's): at its goodbye,
-- runs whose claim answer it never read (a claim cut short by its stop).
SELECT run_id, fencing_token, worker_id FROM attempt_leases
WHERE worker_id = $1 AND ($2::uuid IS NULL OR tenant_id = $2)
ORDER BY run_id;

-- name: release_leases
-- A final outcome ends the lease.
DELETE FROM attempt_leases WHERE run_id = ANY($1::uuid[]);

-- name: abandoned_leases
-- Reconciler: the leases `policy.liveness.abandoned` may take back at $1 (the database clock for
-- NULL), each with what it judges by, locked so one reconciler handles each: the expired ones
-- (by the expiry index, oldest first, at most $4), and those of workers that declare a ping
-- interval and have been silent since before max($3, 3 pings) before $1, counted from $2 (the
-- detector's watch start; 'infinity': not watching yet) and from the latest start of a live
-- gateway instance (seen within $3; none live: nobody is judged silent). `seen_at`: the
-- worker's last ping under any of its scopes that covers the lease's tenant (NULL: not
-- registered).
WITH clock AS (SELECT coalesce($1::timestamptz, now()) AS now),
gateways AS (
    SELECT max(g.started_at) AS since FROM gateway_instances g, clock c
    WHERE g.seen_at > c.now - $3::interval
),
candidates AS (
    (SELECT l.run_id, l.expires_at FROM attempt_leases l, clock c
     WHERE l.expires_at < c.now ORDER BY l.expires_at LIMIT $4)
    UNION
    SELECT l.run_id, l.expires_at
    FROM workers w
    JOIN attempt_leases l ON l.worker_id = w.worker_id
                         AND (w.tenant_id IS NULL OR w.tenant_id = l.tenant_id), clock c,
         gateways gw
    WHERE w.liveness_seconds IS NOT NULL AND gw.since IS NOT NULL
      AND greatest(w.seen_at, $2::timestamptz, gw.since)
          < c.now - greatest($3::interval, make_interval(secs => 3 * w.liveness_seconds))
)
SELECT l.run_id, l.worker_id, l.fencing_token AS lease_token, l.expires_at, s.seen_at,
       s.liveness_seconds, gw.since AS gateways_since, c.now
FROM attempt_leases l
JOIN (SELECT DISTINCT run_id, expires_at FROM candidates ORDER BY expires_at LIMIT $4) AS x
    USING (run_id)
CROSS JOIN clock c
CROSS JOIN gateways gw
LEFT JOIN LATERAL (
    SELECT max(w.seen_at) AS seen_at, max(w.liveness_seconds)::float8 AS liveness_seconds
    FROM workers w
    WHERE w.worker_id = l.worker_id AND (w.tenant_id IS NULL OR w.tenant_id = l.tenant_id)
) AS s ON true
ORDER BY l.expires_at
FOR UPDATE OF l SKIP LOCKED;

-- name: busy_slots
-- Reconciler gauges: attempts holding a lease now (expired ones not reclaimed yet included),
-- per pool: the busy slots of worker utilisation.
SELECT r.pool, count(*)::bigint AS busy
FROM attempt_leases l
JOIN runs r ON r.id = l.run_id
GROUP BY r.pool
ORDER BY r.pool;

-- name: stuck_leases
-- OstinatoLeaseStuck: leases expired more than $2 before $1 (the database clock for NULL) and
-- still there (the reconciler's lease check has not taken them over), per job, with what
-- routing needs.
SELECT r.tenant_id, t.name AS tenant, r.job_id, j.name AS job, j.owner, count(*)::int AS n,
       min(l.expires_at) AS since
FROM attempt_leases l
JOIN runs r ON r.id = l.run_id
JOIN tenants t ON t.id = r.tenant_id
LEFT JOIN jobs j ON j.id = r.job_id
WHERE l.expires_at < coalesce($1::timestamptz, now()) - $2::interval
GROUP BY r.tenant_id, t.name, r.job_id, j.name, j.owner
ORDER BY r.tenant_id, r.job_id
LIMIT $3;

-- name: instance_seen
-- A scheduler instance says it is alive; returns how many instances are alive.
WITH seen AS (
    INSERT INTO scheduler_instances (id, last_seen) VALUES ($1, coalesce($2::timestamptz, now()))
    ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen
)
SELECT count(*) + 1 AS live FROM scheduler_instances
WHERE id <> $1 AND last_seen > coalesce($2::timestamptz, now()) - $3::interval;

-- name: instance_gone
-- A scheduler instance stopping gracefully.
DELETE FROM scheduler_instances WHERE id = $1;

-- name: renew_shards_if_epoch
-- Extend the leases this owner still holds at the epochs it knows; a lost one is not returned.
-- $6: per shard, the instant up to which this owner has completed a pass (NULL: none since it
-- took the shard): `decided_through` only moves forward, and only under the current epoch.
UPDATE shard_leases AS l SET expires_at = coalesce($4::timestamptz, now()) + $5::interval,
                             decided_through = greatest(l.decided_through, x.d)
FROM unnest($2::smallint[], $3::bigint[], $6::timestamptz[]) AS x(s, e, d)
WHERE l.shard = x.s AND l.epoch = x.e AND l.owner = $1
  AND l.expires_at > coalesce($4::timestamptz, now())
RETURNING l.shard, l.epoch;

-- name: acquire_shards
-- Take free or expired shards (at most $2); each acquisition bumps the shard's epoch.
UPDATE shard_leases AS l
SET owner = $1, epoch = l.epoch + 1, expires_at = coalesce($3::timestamptz, now()) + $4::interval
FROM (SELECT shard FROM shard_leases
      WHERE owner IS NULL OR expires_at <= coalesce($3::timestamptz, now())
      ORDER BY shard LIMIT $2 FOR UPDATE SKIP LOCKED) AS free
WHERE l.shard = free.shard
RETURNING l.shard, l.epoch;

-- name: release_shards_if_epoch
-- Give shards back (rebalancing, graceful stop) so another instance can take them at once.
UPDATE shard_leases AS l SET owner = NULL, expires_at = '-infinity'
FROM unnest($2::smallint[], $3::bigint[]) AS x(s, e)
WHERE l.shard = x.s AND l.epoch = x.e AND l.owner = $1
RETURNING l.shard;

-- name: hold_shards_if_epoch
-- Inside a scheduler's transaction: its leases are still current (FOR SHARE: a takeover waits
-- until this transaction ends, so a write under a lost lease can never commit).
SELECT l.shard FROM shard_leases AS l
JOIN unnest($2::smallint[], $3::bigint[]) AS x(s, e) ON l.shard = x.s AND l.epoch = x.e
WHERE l.owner = $1 AND l.expires_at > coalesce($4::timestamptz, now())
FOR SHARE OF l;

-- name: shard_table
-- For metrics and tests: every shard's owner and epoch.
SELECT shard, owner, epoch, expires_at FROM shard_leases ORDER BY shard;

-- name: shard_passes
-- The reconciler: per shard, the instant up to which its scheduler has completed a pass (NULL:
-- none yet; asyncpg would read '-infinity' as a naive datetime.min), and
-- whether a scheduler holds the shard now by the database clock ($1; NULL: now()).
SELECT shard, nullif(decided_through, '-infinity') AS decided_through,
       owner IS NOT NULL AND expires_at > coalesce($1::timestamptz, now()) AS live
FROM shard_leases ORDER BY shard;

-- name: decided_through_of_job
-- The ledger: how far the scheduler has decided the shard a job belongs to (NULL: not at all).
SELECT nullif(l.decided_through, '-infinity') AS decided_through
FROM jobs j JOIN shard_leases l ON l.shard = j.shard WHERE j.id = $1;

-- name: passed_every_shard
-- A scheduler working without leases (one instance, tests) completed a pass over every shard.
UPDATE shard_leases SET decided_through = greatest(decided_through, $1::timestamptz)
WHERE decided_through < $1::timestamptz;
