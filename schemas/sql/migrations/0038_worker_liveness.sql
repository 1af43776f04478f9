-- 0038: a dead worker is detected in seconds, not a lease (issue 39). A worker declares how
-- often it says it is alive while it holds runs (`ClaimRequest.liveness_seconds`, the SDK's
-- ping); the reconciler takes the leases of a worker silent for longer than
-- max(OSTINATO_WORKER_DEAD_AFTER_SECONDS, 3 pings) through the same fenced path as an expired
-- lease. NULL: a worker that declares nothing (an older SDK) is judged by its leases alone.
-- Expand only: an older gateway neither writes nor reads the column.
ALTER TABLE workers ADD COLUMN liveness_seconds real CHECK (liveness_seconds > 0);
