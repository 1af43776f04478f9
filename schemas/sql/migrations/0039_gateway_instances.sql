-- 0039: a dead worker is told from a gateway outage (issue 39). Each worker-gateway instance
-- says it is alive every second (row per instance; a graceful stop counts as a start). The
-- reconciler counts a pinging worker's silence only from the latest start of a live instance,
-- and judges nobody while no instance is live: a worker cannot ping through a gateway that is
-- down or restarting, so that silence is not its death.
CREATE TABLE gateway_instances (
    id text PRIMARY KEY,
    started_at timestamptz NOT NULL,
    seen_at timestamptz NOT NULL
);
