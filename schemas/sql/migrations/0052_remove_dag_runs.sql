-- 0052: DAG runs leave the hot tables too (issue 38; docs/RETENTION.md "DAG runs", docs/DAGS.md
-- "Retention").
--
-- A finished DAG run's node runs were archived and removed like any run (0046), but the DAG run
-- itself stayed for ever: its `dag_runs` row, its `dag_run_nodes`, its `dag_run` stream and,
-- for a one-off DAG job, the job's row and stream (12 rows for a two-node DAG). Under a steady
-- DAG load the database grew without bound. Now the archiver writes a finished DAG run's
-- history to the object store (ostinato.archive.dag_run_key) once its node runs have left,
-- then removes it through ostinato_remove_dag_runs, an owner-role SECURITY DEFINER function
-- like ostinato_remove_runs: the services' role may EXECUTE it and still has no UPDATE or
-- DELETE on `events`; the append-only trigger's one exception (0046: a DELETE by the table's
-- owner while the transaction-local flag is set) is the door it uses. The DAG's definition
-- (`dags`, `dag_versions`) stays while the DAG exists.
--
-- Expand-only (docs/UPGRADES.md): new functions and one partial index; no column added.

-- The archiver's pick (stores/archive.sql `dag_run_candidates`): a tenant's finished DAG runs,
-- oldest end first.
CREATE INDEX IF NOT EXISTS dag_runs_ended ON dag_runs (tenant_id, finished_at)
    WHERE state IN ('succeeded', 'failed', 'cancelled');

-- The rules for a DAG run as one function of the facts, the SQL twin of
-- ostinato.domain.retention.dag_run_removable (tests/integration/test_archive_dags.py feeds both
-- the same cases): every reason it is kept, in the same order, by the same names; empty = it
-- may go. One expression, only built-in operators: inlinable, as ostinato_retention_kept.
CREATE OR REPLACE FUNCTION ostinato_dag_run_retention_kept(
    state text, ended_at timestamptz, node_runs_hot boolean, checked_slot timestamptz,
    deadline timestamptz, latest_success_of_job boolean, keep_seconds bigint,
    now timestamptz, checks_window interval
) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT array_remove(ARRAY[
        CASE WHEN NOT (state IN ('succeeded', 'failed', 'cancelled') AND ended_at IS NOT NULL)
             THEN 'not_final' END,
        CASE WHEN node_runs_hot THEN 'node_run_in_hot_tables' END,
        CASE WHEN state IN ('succeeded', 'failed', 'cancelled') AND ended_at IS NOT NULL
                  AND now < ended_at + keep_seconds * interval '1 second'
             THEN 'inside_retention' END,
        CASE WHEN checked_slot >= now - checks_window THEN 'slot_in_checks_window' END,
        CASE WHEN deadline >= now - checks_window THEN 'deadline_in_checks_window' END,
        CASE WHEN latest_success_of_job THEN 'latest_success_of_job' END
    ], NULL::text)
$$;
GRANT EXECUTE ON FUNCTION ostinato_dag_run_retention_kept(text, timestamptz, boolean,
    timestamptz, timestamptz, boolean, bigint, timestamptz, interval) TO ostinato_app;

-- One DAG run's reasons to stay, its facts read from the hot tables: what the archiver's pick
-- filters on and what ostinato_remove_dag_runs re-checks under the row lock. NULL: no such DAG
-- run. A DAG job's occurrence is its DAG run, so the gap check and the ledger
-- (runs_of_job_between, ledger_runs_of_job), the deadline check (deadline_overdue_runs) and
-- the staleness rules (alert_stale_jobs, alert_job_findings, deadline_stale_jobs) read
-- `dag_runs` as they read `runs`: the same window rules keep what they read.
--   node_run_in_hot_tables  a run one of its DagNodeReady events named (any generation) is
--                           still in `runs`, for whatever reason its own rules keep it (a held
--                           node run keeps its DAG run): the DAG run leaves after them
CREATE OR REPLACE FUNCTION ostinato_dag_run_kept(
    dag_run uuid, at_now timestamptz, checks_window interval
) RETURNS text[]
LANGUAGE plpgsql STABLE
COST 500
SET search_path = public, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    kept text[];
BEGIN
    SELECT ostinato_dag_run_retention_kept(
               d.state, d.finished_at,
               EXISTS (SELECT 1 FROM events e JOIN runs r ON r.id = (e.data ->> 'run_id')::uuid
                       WHERE e.stream_id = d.id AND e.type = 'DagNodeReady'),
               CASE WHEN d.trigger <> 'manual' AND j.kind IN ('cron', 'every')
                         AND j.status IN ('active', 'paused')
                    THEN d.scheduled_for END,
               d.scheduled_for + j.complete_within_seconds * interval '1 second',
               d.state = 'succeeded' AND j.kind IN ('cron', 'every') AND j.status <> 'deleted'
                   AND (NOT EXISTS (SELECT 1 FROM dag_runs s
                                    WHERE s.job_id = d.job_id AND s.state = 'succeeded'
                                      AND s.scheduled_for > d.scheduled_for)
                        OR NOT EXISTS (SELECT 1 FROM dag_runs s
                                       WHERE s.job_id = d.job_id AND s.state = 'succeeded'
                                         AND s.finished_at > d.finished_at)),
               coalesce(tr.keep_seconds, 2592000), at_now, checks_window)
    INTO kept
    FROM dag_runs d
    LEFT JOIN jobs j ON j.id = d.job_id
    LEFT JOIN tenant_retention tr ON tr.tenant_id = d.tenant_id
    WHERE d.id = dag_run;
    RETURN kept;
END
$$;
GRANT EXECUTE ON FUNCTION ostinato_dag_run_kept(uuid, timestamptz, interval) TO ostinato_app;

-- A one-off job's rows once nothing of it is hot: its stream, side rows and payloads (their
-- bytes carried into usage_carried as 0046 does). Called by ostinato_remove_dag_runs only, as
-- the owner inside it: no role of the services may EXECUTE it.
CREATE OR REPLACE FUNCTION ostinato_remove_one_off_jobs(job_ids uuid[]) RETURNS void
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $$
DECLARE
    blob_ids uuid[];
BEGIN
    IF cardinality(job_ids) = 0 THEN
        RETURN;
    END IF;
    blob_ids := ARRAY(SELECT DISTINCT b FROM (
        SELECT (e.data ->> 'payload_ref')::uuid AS b FROM events e
        WHERE e.stream_id = ANY(job_ids) AND e.stream_type = 'job'
          AND e.data ->> 'payload_ref' IS NOT NULL
        UNION ALL
        SELECT j.payload_ref FROM jobs j WHERE j.id = ANY(job_ids)
    ) AS refs WHERE b IS NOT NULL);
    PERFORM set_config('ostinato.removing_runs', 'on', true);
    DELETE FROM events e WHERE e.stream_id = ANY(job_ids) AND e.stream_type = 'job';
    PERFORM set_config('ostinato.removing_runs', '', true);
    DELETE FROM job_attributes x WHERE x.job_id = ANY(job_ids);
    DELETE FROM job_definitions x WHERE x.job_id = ANY(job_ids);
    DELETE FROM job_pauses x WHERE x.job_id = ANY(job_ids);
    DELETE FROM occurrence_skips x WHERE x.job_id = ANY(job_ids);
    DELETE FROM jobs x WHERE x.id = ANY(job_ids);
    INSERT INTO usage_carried AS u (tenant_id, hour, payload_bytes)
    SELECT b.tenant_id, date_trunc('hour', b.created_at, 'UTC'), sum(b.size_bytes)
    FROM blobs b WHERE b.id = ANY(blob_ids) AND b.kind = 'payload'
    GROUP BY 1, 2
    ON CONFLICT (tenant_id, hour) DO UPDATE SET
        payload_bytes = u.payload_bytes + excluded.payload_bytes;
    DELETE FROM blobs b WHERE b.id = ANY(blob_ids);
END
$$;
REVOKE ALL ON FUNCTION ostinato_remove_one_off_jobs(uuid[]) FROM PUBLIC;

-- Archive, then remove, for DAG runs: the caller (the archiver duty) passes the DAG runs it
-- has archived (or, for a tenant whose policy says archive=false, read) with the stream version
-- it read. Each comes back removed, or kept with the reason: a rule's (its first, as
-- ostinato_dag_run_kept names them), or
--   not_found   no such DAG run (removed already, or never)
--   busy        another transaction holds its row (the advance duty, a cancel, a retry from a
--               node: each locks the DAG run before it makes a node run): next pass
--   changed     its stream moved past the version archived: archived again next pass
-- In one transaction: the DAG run's stream, its nodes and its row; a recurring DAG job's
-- occurrence is carried into ledger_carried (its slot reads as it did: `failed` is carried as
-- the run state the ledger reads the same way, `dead_lettered`); and a one-off DAG job (task
-- 'dag:%', fired or deleted) once no DAG run or run of it is left. At most 1000 a call.
CREATE OR REPLACE FUNCTION ostinato_remove_dag_runs(
    dag_run_ids uuid[], versions integer[], checks_window interval DEFAULT interval '24 hours'
) RETURNS TABLE (dag_run_id uuid, removed boolean, kept_because text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
DECLARE
    at_now    timestamptz := now();
    locked    uuid[];
    d_ids     uuid[];
    d_reasons text[];
    gone      uuid[];
    gone_jobs uuid[];
    jobs_gone uuid[];
    slot_run  record;
BEGIN
    IF dag_run_ids IS NULL OR versions IS NULL
       OR cardinality(dag_run_ids) <> cardinality(versions) THEN
        RAISE EXCEPTION 'ostinato_remove_dag_runs: dag_run_ids and versions must pair up'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(dag_run_ids) > 1000 THEN
        RAISE EXCEPTION 'ostinato_remove_dag_runs: at most 1000 DAG runs a call, got %',
            cardinality(dag_run_ids) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF checks_window IS NULL OR checks_window < interval '0' THEN
        RAISE EXCEPTION 'ostinato_remove_dag_runs: checks_window must be a non-negative interval'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- Lock in id order (as lock_dag_runs_skip does); a row a writer holds is skipped. Holding
    -- it, no node run can be made for it meanwhile: every writer that makes one locks it first.
    locked := ARRAY(SELECT d.id FROM dag_runs d WHERE d.id = ANY(dag_run_ids)
                    ORDER BY d.id FOR UPDATE SKIP LOCKED);

    SELECT coalesce(array_agg(f.id ORDER BY f.id), '{}'), array_agg(f.reason ORDER BY f.id)
    INTO d_ids, d_reasons
    FROM (
        SELECT DISTINCT ON (w.id) w.id,
           CASE
               WHEN d.id IS NULL AND EXISTS (SELECT 1 FROM dag_runs x WHERE x.id = w.id)
                   THEN 'busy'
               WHEN d.id IS NULL THEN 'not_found'
               WHEN (SELECT max(e.version) FROM events e WHERE e.stream_id = d.id)
                    IS DISTINCT FROM w.version THEN 'changed'
               ELSE (ostinato_dag_run_kept(d.id, at_now, checks_window))[1]
           END AS reason
        FROM unnest(dag_run_ids, versions) AS w(id, version)
        LEFT JOIN dag_runs d ON d.id = w.id AND d.id = ANY(locked)
        ORDER BY w.id
    ) AS f;

    gone := ARRAY(SELECT x.id FROM unnest(d_ids, d_reasons) AS x(id, reason)
                  WHERE x.reason IS NULL);
    IF cardinality(gone) > 0 THEN
        -- The ledger's history: a recurring DAG job's occurrences (ledger_runs_of_job reads its
        -- DAG runs), as ranges of one state, as 0046 carries a job's runs.
        FOR slot_run IN
            SELECT d.job_id, d.tenant_id, d.scheduled_for,
                   CASE d.state WHEN 'failed' THEN 'dead_lettered' ELSE d.state END AS state
            FROM dag_runs d JOIN jobs j ON j.id = d.job_id
            WHERE d.id = ANY(gone) AND j.kind IN ('cron', 'every') AND d.trigger <> 'manual'
              AND d.scheduled_for IS NOT NULL
            ORDER BY d.job_id, d.scheduled_for
        LOOP
            UPDATE ledger_carried c
            SET last_slot = slot_run.scheduled_for, runs = c.runs + 1
            WHERE c.job_id = slot_run.job_id
              AND c.first_slot = (SELECT max(l.first_slot) FROM ledger_carried l
                                  WHERE l.job_id = slot_run.job_id
                                    AND l.first_slot < slot_run.scheduled_for)
              AND c.state = slot_run.state AND c.last_slot < slot_run.scheduled_for
              AND NOT EXISTS (SELECT 1 FROM dag_runs h
                              WHERE h.job_id = slot_run.job_id AND h.trigger <> 'manual'
                                AND h.scheduled_for > c.last_slot
                                AND h.scheduled_for < slot_run.scheduled_for
                                AND h.id <> ALL(gone));
            IF NOT FOUND THEN
                INSERT INTO ledger_carried (job_id, first_slot, last_slot, tenant_id, state, runs)
                VALUES (slot_run.job_id, slot_run.scheduled_for, slot_run.scheduled_for,
                        slot_run.tenant_id, slot_run.state, 1)
                ON CONFLICT (job_id, first_slot) DO NOTHING;
            END IF;
        END LOOP;

        gone_jobs := ARRAY(SELECT DISTINCT d.job_id FROM dag_runs d
                           WHERE d.id = ANY(gone) AND d.job_id IS NOT NULL);

        PERFORM set_config('ostinato.removing_runs', 'on', true);
        DELETE FROM events e WHERE e.stream_id = ANY(gone) AND e.stream_type = 'dag_run';
        PERFORM set_config('ostinato.removing_runs', '', true);
        DELETE FROM dag_run_nodes x WHERE x.dag_run_id = ANY(gone);
        DELETE FROM dag_runs x WHERE x.id = ANY(gone);

        -- A one-off DAG job goes with its last DAG run: nothing of it left hot (its DAG runs
        -- through dag_runs_job_slot; a run of it that is no node's through runs_job_slot; its
        -- node runs left before their DAG runs, node_run_in_hot_tables).
        jobs_gone := ARRAY(
            SELECT j.id FROM jobs j
            WHERE j.id = ANY(gone_jobs)
              AND j.kind = 'at' AND j.status IN ('completed', 'deleted')
              AND j.task LIKE 'dag:%'
              AND NOT EXISTS (SELECT 1 FROM dag_runs d WHERE d.job_id = j.id)
              AND NOT EXISTS (SELECT 1 FROM runs r
                              WHERE r.job_id = j.id AND r.parent_run_id IS NULL
                                AND r.trigger <> 'dag')
            ORDER BY j.id
            FOR UPDATE);
        PERFORM ostinato_remove_one_off_jobs(jobs_gone);
    END IF;

    RETURN QUERY SELECT x.id, x.reason IS NULL, x.reason
                 FROM unnest(d_ids, d_reasons) AS x(id, reason) ORDER BY x.id;
END
$$;
REVOKE ALL ON FUNCTION ostinato_remove_dag_runs(uuid[], integer[], interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ostinato_remove_dag_runs(uuid[], integer[], interval) TO ostinato_app;
