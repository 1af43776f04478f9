-- 0004: scheduler ownership — due jobs are partitioned into shards; each shard is leased by one
-- scheduler instance at a time, with a monotonic epoch bumped at every acquisition. Leases are
-- judged by the database clock.

CREATE TABLE shard_leases (
    shard      smallint    PRIMARY KEY,
    owner      text,
    epoch      bigint      NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO shard_leases (shard) SELECT generate_series(0, 15);

-- Live scheduler instances, so each can compute its fair share of shards.
CREATE TABLE scheduler_instances (
    id        text        PRIMARY KEY,
    last_seen timestamptz NOT NULL
);

ALTER TABLE jobs ADD COLUMN shard smallint;
UPDATE jobs SET shard = (('x' || substr(md5(id::text), 1, 8))::bit(32)::bigint % 16)::smallint;
ALTER TABLE jobs ALTER COLUMN shard SET NOT NULL;
DROP INDEX jobs_due;
CREATE INDEX jobs_due ON jobs (shard, next_run_at)
    WHERE status = 'active' AND next_run_at IS NOT NULL;
