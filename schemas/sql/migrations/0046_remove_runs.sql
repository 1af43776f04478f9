-- 0046: archive, then remove (issue 38 item 2; docs/RETENTION.md, docs/ARCHITECTURE.md
-- "Retention: an owner-role procedure, not partition drops").
--
-- A finished run leaves the hot tables through ONE door: ostinato_remove_runs, a SECURITY
-- DEFINER function owned by the owner role, which the services' role may EXECUTE and nothing
-- more. It re-checks every rule of docs/RETENTION.md's table with the database's clock and the
-- tenant's policy, row-locks what it removes, and in one transaction deletes the run's stream
-- and every row of the run in the hot tables (and a one-off job whose runs are all gone). The
-- services' role still has no UPDATE or DELETE on `events` (0025): the append-only trigger
-- gets exactly one exception, a DELETE made by the table's owner while the function's
-- transaction-local flag is set, which only this function sets (and clears before returning).
--
-- Expand-only (docs/UPGRADES.md): new functions, tables and one partial index; the trigger
-- function keeps refusing everything the previous release could do.

-- The archiver's pick (services/reconciler/checks/archive.py, `archive_candidates`): a tenant's
-- finished runs oldest end first. Partial: only final rows enter it, at their final transition
-- (every run update is already non-HOT: state and updated_at are indexed).
CREATE INDEX IF NOT EXISTS runs_ended ON runs (tenant_id, finished_at)
    WHERE state IN ('succeeded', 'dead_lettered', 'cancelled');

-- Usage that must survive a run's removal (issue 38 item 6): GET /v1/usage counts runs,
-- attempts, steps, worker-seconds and output bytes from the log, and payload bytes from
-- `blobs`. The procedure adds what it removes here, by UTC hour (a day bucket is the sum of its
-- hours), and stores/usage.sql adds these rows to what the log still holds. Not a read model:
-- a rebuild leaves it alone (what it counts is no longer in the log). One row per tenant and
-- hour with removals: bounded, not per run.
CREATE TABLE IF NOT EXISTS usage_carried (
    tenant_id      uuid             NOT NULL,
    hour           timestamptz      NOT NULL,  -- date_trunc('hour', occurred_at, 'UTC')
    runs           bigint           NOT NULL DEFAULT 0,
    attempts       bigint           NOT NULL DEFAULT 0,
    workflow_steps bigint           NOT NULL DEFAULT 0,
    worker_seconds double precision NOT NULL DEFAULT 0,
    output_bytes   bigint           NOT NULL DEFAULT 0,
    payload_bytes  bigint           NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, hour)
);
-- Written by the procedure only (as the owner); the services read it.
REVOKE INSERT, UPDATE, DELETE ON usage_carried FROM ostinato_app;

-- The ledger's expected-versus-actual history that must survive (issue 38 item 6): GET
-- /v1/jobs/{id}/ledger classifies each expected slot of a recurring job by its run. The
-- procedure records the slots of the runs it removes as ranges of one state: a run extends its
-- job's latest range when the state is the same and no run of the job stayed hot in between,
-- so a job whose runs all succeed keeps one row (ostinato.ledger.carried_runs reads them).
CREATE TABLE IF NOT EXISTS ledger_carried (
    job_id     uuid        NOT NULL,
    first_slot timestamptz NOT NULL,
    last_slot  timestamptz NOT NULL,
    tenant_id  uuid        NOT NULL,
    state      text        NOT NULL,  -- the runs' final state
    runs       integer     NOT NULL CHECK (runs >= 1),
    PRIMARY KEY (job_id, first_slot),
    CHECK (last_slot >= first_slot)
);
REVOKE INSERT, UPDATE, DELETE ON ledger_carried FROM ostinato_app;

-- The archiver's health, one row (services/reconciler/checks/archive.py writes it after each
-- pass; the alert OstinatoArchiveFailing reads it): since when its passes fail (NULL: the
-- last one succeeded), why, and its last success, by the database's clock.
CREATE TABLE IF NOT EXISTS archive_state (
    id              boolean     PRIMARY KEY DEFAULT true CHECK (id),
    failing_since   timestamptz,
    last_error      text,
    last_success_at timestamptz,
    updated_at      timestamptz NOT NULL
);

-- The rules of docs/RETENTION.md's table as one pure function of the facts, the SQL twin of
-- ostinato.domain.retention.removable (tests/integration/test_remove_runs.py feeds both the
-- same cases): every reason a run is kept, in the same order, by the same names; empty = the
-- run may go. `now` is the caller's (the procedure passes the database's clock).
CREATE OR REPLACE FUNCTION ostinato_retention_kept(
    state text, ended_at timestamptz, held boolean, dead_letter_triage text,
    triaged_at timestamptz, children_not_final boolean, parent_state text,
    parent_notified boolean, dag_run_state text, checked_slot timestamptz,
    deadline timestamptz, latest_success_of_job boolean, keep_seconds bigint,
    now timestamptz, checks_window interval
) RETURNS text[]
-- one expression, no FROM and no SET: PostgreSQL inlines it into its callers (a SQL function
-- it cannot inline is planned again at every call: 1.3 ms a run, measured by
-- bench/archive_plan.py); only built-in operators, which pg_catalog resolves first
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT array_remove(ARRAY[
        CASE WHEN NOT (state IN ('succeeded', 'dead_lettered', 'cancelled')
                       AND ended_at IS NOT NULL) THEN 'not_final' END,
        CASE WHEN held THEN 'held' END,
        CASE WHEN dead_letter_triage = 'new'
                  OR (state = 'dead_lettered' AND dead_letter_triage IS NULL)
             THEN 'dead_letter_untriaged' END,
        CASE WHEN children_not_final THEN 'child_not_final' END,
        CASE WHEN parent_state IS NOT NULL
                  AND parent_state NOT IN ('succeeded', 'dead_lettered', 'cancelled')
             THEN 'parent_not_final' END,
        CASE WHEN NOT parent_notified THEN 'parent_not_told' END,
        CASE WHEN dag_run_state IS NOT NULL
                  AND dag_run_state NOT IN ('succeeded', 'failed', 'cancelled')
             THEN 'dag_run_not_final' END,
        -- retention runs from the later of the end and a dead letter's triage
        CASE WHEN state IN ('succeeded', 'dead_lettered', 'cancelled') AND ended_at IS NOT NULL
                  AND now < greatest(ended_at, triaged_at) + keep_seconds * interval '1 second'
             THEN 'inside_retention' END,
        CASE WHEN checked_slot >= now - checks_window THEN 'slot_in_checks_window' END,
        CASE WHEN deadline >= now - checks_window THEN 'deadline_in_checks_window' END,
        CASE WHEN latest_success_of_job THEN 'latest_success_of_job' END
    ], NULL::text)
$$;
GRANT EXECUTE ON FUNCTION ostinato_retention_kept(text, timestamptz, boolean, text, timestamptz,
    boolean, text, boolean, text, timestamptz, timestamptz, boolean, bigint, timestamptz,
    interval) TO ostinato_app;

-- One run's reasons to stay, its facts read from the hot tables (docs/RETENTION.md's table,
-- then the procedure's own two): what the archiver's pick filters on (stores/archive.sql) and
-- what ostinato_remove_runs re-checks under the row lock. NULL: no such run.
--   job_failure_streak   a dead letter a recurring job's consecutive_failures still counts
--                        (no success of the job ended after it): a rebuild must count it
--                        again (a one-off job leaves with its last run, its count with it)
--   child_in_hot_tables  a child of it stays (for any reason): a parent leaves with or after
--                        its children, so a one-off job goes only once all its runs have
CREATE OR REPLACE FUNCTION ostinato_run_kept(
    run uuid, at_now timestamptz, checks_window interval
) RETURNS text[]
LANGUAGE plpgsql STABLE
COST 1000  -- a dozen index probes: the planner tests cheaper conditions first
SET search_path = public, pg_temp
-- its one statement's plan, made once per session: a custom plan per call (the cache's
-- default for a statement with parameters) cost 0.5 ms of planning a run, more than running it
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    kept text[];
BEGIN
    SELECT ostinato_retention_kept(
               r.state, r.finished_at,
               EXISTS (SELECT 1 FROM run_holds h WHERE h.run_id = r.id),
               d.triage_state, d.triaged_at,
               EXISTS (SELECT 1 FROM runs c WHERE c.parent_run_id = r.id
                         AND c.state NOT IN ('succeeded', 'dead_lettered', 'cancelled')),
               p.state,
               r.parent_run_id IS NULL OR r.parent_notified,
               (SELECT dr.state FROM dag_run_nodes n JOIN dag_runs dr ON dr.id = n.dag_run_id
                WHERE n.run_id = r.id ORDER BY dr.created_at DESC LIMIT 1),
               -- a slot the gap check (runs_of_job_between: every run not manual) reads
               CASE WHEN r.trigger <> 'manual'
                         AND j.kind IN ('cron', 'every') AND j.status IN ('active', 'paused')
                    THEN r.scheduled_for END,
               CASE WHEN r.parent_run_id IS NULL AND r.trigger <> 'dag'
                    THEN r.scheduled_for + j.complete_within_seconds * interval '1 second'
               END,
               -- the latest success of a recurring job, by slot or by end (runs_job_slot):
               -- what its staleness rule and finding alerts read
               -- (compared with the job's top-level runs, through the index)
               r.state = 'succeeded' AND j.kind IN ('cron', 'every') AND j.status <> 'deleted'
                   AND r.trigger <> 'dag'
                   AND (NOT EXISTS (
                            SELECT 1 FROM runs s
                            WHERE s.job_id = r.job_id AND s.parent_run_id IS NULL
                              AND s.trigger <> 'dag' AND s.state = 'succeeded'
                              AND s.scheduled_for > r.scheduled_for)
                        OR NOT EXISTS (
                            SELECT 1 FROM runs s
                            WHERE s.job_id = r.job_id AND s.parent_run_id IS NULL
                              AND s.trigger <> 'dag' AND s.state = 'succeeded'
                              AND s.finished_at > r.finished_at)),
               coalesce(tr.keep_seconds, 2592000), at_now, checks_window)
           || CASE WHEN r.state = 'dead_lettered' AND j.kind IN ('cron', 'every')
                        AND j.consecutive_failures > 0
                        AND NOT EXISTS (
                            SELECT 1 FROM runs s
                            WHERE s.job_id = r.job_id AND s.parent_run_id IS NULL
                              AND s.trigger <> 'dag' AND s.state = 'succeeded'
                              AND s.finished_at > r.finished_at)
                   THEN ARRAY['job_failure_streak'] ELSE '{}'::text[] END
           || CASE WHEN EXISTS (SELECT 1 FROM runs c WHERE c.parent_run_id = r.id
                                  AND cardinality(ostinato_run_kept(c.id, at_now,
                                                                    checks_window)) > 0)
                   THEN ARRAY['child_in_hot_tables'] ELSE '{}'::text[] END
    INTO kept
    FROM runs r
    LEFT JOIN dead_letters d ON d.run_id = r.id
    LEFT JOIN runs p ON p.id = r.parent_run_id
    LEFT JOIN jobs j ON j.id = r.job_id
    LEFT JOIN tenant_retention tr ON tr.tenant_id = r.tenant_id
    WHERE r.id = run;
    RETURN kept;
END
$$;
GRANT EXECUTE ON FUNCTION ostinato_run_kept(uuid, timestamptz, interval) TO ostinato_app;

-- The log's one exception: a DELETE by the table's owner while ostinato_remove_runs's flag is
-- set. UPDATE and TRUNCATE stay refused to everyone; the services' role has no DELETE on the
-- table at all (0025), so for it nothing changes.
CREATE OR REPLACE FUNCTION refuse_event_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE'
       AND current_setting('ostinato.removing_runs', true) = 'on'
       AND current_user = (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = TG_RELID)
    THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'the run-event log is append-only: % on events is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;

-- Archive, then remove: the caller (the archiver duty) passes the runs it has archived (or,
-- for a tenant whose policy says archive=false, read) with the stream version it read. Each
-- run comes back removed, or kept with the reason: a rule of the table's (its first), or
--   not_found              no such run (removed already, or never)
--   busy                   another transaction holds its row: next pass
--   changed                its stream moved past the version the caller archived: re-archive
--   child_in_hot_tables    also when a child that may go is not in this call
-- At most 1000 runs a call (a bounded transaction).
CREATE OR REPLACE FUNCTION ostinato_remove_runs(
    run_ids uuid[], versions integer[], checks_window interval DEFAULT interval '24 hours'
) RETURNS TABLE (run_id uuid, removed boolean, kept_because text)
LANGUAGE plpgsql
SECURITY DEFINER
-- pinned: nothing the caller puts on its path (or in its temporary schema) is resolved here;
-- and no temporary table is used, so no object of the caller's runs with the owner's rights
SET search_path = public, pg_temp
AS $$
DECLARE
    at_now      timestamptz := now();
    locked      uuid[];
    d_ids       uuid[];
    d_reasons   text[];
    d_jobs      uuid[];
    d_parents   uuid[];
    d_payloads  uuid[];
    new_reasons text[];
    gone        uuid[];
    jobs_gone   uuid[];
    blob_ids    uuid[];
    slot_run    record;
BEGIN
    IF run_ids IS NULL OR versions IS NULL
       OR cardinality(run_ids) <> cardinality(versions) THEN
        RAISE EXCEPTION 'ostinato_remove_runs: run_ids and versions must pair up'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(run_ids) > 1000 THEN
        RAISE EXCEPTION 'ostinato_remove_runs: at most 1000 runs a call, got %',
            cardinality(run_ids) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF checks_window IS NULL OR checks_window < interval '0' THEN
        RAISE EXCEPTION 'ostinato_remove_runs: checks_window must be a non-negative interval'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- Lock in id order (as stores/runs.sql lock_runs does: no deadlock with a writer); a row
    -- a writer holds is skipped, not waited for. A writer that comes after finds no row.
    locked := ARRAY(SELECT r.id FROM runs r WHERE r.id = ANY(run_ids)
                    ORDER BY r.id FOR UPDATE SKIP LOCKED);

    -- Each run's verdict: the first reason it is kept, or NULL.
    SELECT coalesce(array_agg(f.id ORDER BY f.id), '{}'), array_agg(f.reason ORDER BY f.id),
           array_agg(f.job_id ORDER BY f.id), array_agg(f.parent_run_id ORDER BY f.id),
           array_agg(f.payload_ref ORDER BY f.id)
    INTO d_ids, d_reasons, d_jobs, d_parents, d_payloads
    FROM (
        SELECT DISTINCT ON (w.id) w.id, r.job_id, r.parent_run_id, r.payload_ref,
           CASE
               WHEN r.id IS NULL AND EXISTS (SELECT 1 FROM runs x WHERE x.id = w.id)
                   THEN 'busy'
               WHEN r.id IS NULL THEN 'not_found'
               -- the log is the truth: its stream's head, not the projection's version
               WHEN (SELECT max(e.version) FROM events e WHERE e.stream_id = r.id)
                    IS DISTINCT FROM w.version THEN 'changed'
               ELSE (ostinato_run_kept(r.id, at_now, checks_window))[1]
           END AS reason
        FROM unnest(run_ids, versions) AS w(id, version)
        LEFT JOIN runs r ON r.id = w.id AND r.id = ANY(locked)
        ORDER BY w.id
    ) AS f;

    -- A parent leaves with or after its children: kept while a child stays hot (to a
    -- fixpoint, for a child kept in this same call).
    LOOP
        gone := ARRAY(SELECT x.id FROM unnest(d_ids, d_reasons) AS x(id, reason)
                      WHERE x.reason IS NULL);
        new_reasons := ARRAY(
            SELECT CASE WHEN x.reason IS NULL
                             AND EXISTS (SELECT 1 FROM runs c WHERE c.parent_run_id = x.id
                                           AND c.id <> ALL(gone))
                        THEN 'child_in_hot_tables' ELSE x.reason END
            FROM unnest(d_ids, d_reasons) WITH ORDINALITY AS x(id, reason, ord)
            ORDER BY x.ord);
        EXIT WHEN new_reasons IS NOT DISTINCT FROM d_reasons;
        d_reasons := new_reasons;
    END LOOP;

    IF cardinality(gone) > 0 THEN
        -- What usage must still count once the events are gone (stores/usage.sql's rules).
        INSERT INTO usage_carried AS u (tenant_id, hour, runs, attempts, workflow_steps,
                                        worker_seconds, output_bytes)
        SELECT e.tenant_id, date_trunc('hour', e.occurred_at, 'UTC'),
               count(*) FILTER (WHERE e.type = 'RunScheduled'),
               count(*) FILTER (WHERE e.type = 'RunStarted'),
               count(*) FILTER (WHERE e.type IN ('StepCompleted', 'StepFailed')),
               coalesce(sum(extract(epoch FROM fin.occurred_at - e.occurred_at))
                            FILTER (WHERE e.type = 'RunStarted'), 0),
               coalesce(sum((e.data ->> 'output_bytes')::bigint)
                            FILTER (WHERE e.type IN ('RunSucceeded', 'RunCancelled',
                                                     'RunMarkedSucceeded')), 0)
        FROM events e
        LEFT JOIN LATERAL (
            SELECT f.occurred_at FROM events f
            WHERE e.type = 'RunStarted' AND f.stream_id = e.stream_id AND f.version > e.version
              AND f.type IN ('RunSucceeded', 'RunFailed', 'AttemptTimedOut', 'LeaseExpired',
                             'LeaseReleased', 'RunSuspended', 'RunCancelled')
            ORDER BY f.version LIMIT 1) AS fin ON true
        WHERE e.stream_id = ANY(gone)
          AND e.type IN ('RunScheduled', 'RunStarted', 'StepCompleted', 'StepFailed',
                         'RunSucceeded', 'RunCancelled', 'RunMarkedSucceeded')
        GROUP BY 1, 2
        ON CONFLICT (tenant_id, hour) DO UPDATE SET
            runs = u.runs + excluded.runs, attempts = u.attempts + excluded.attempts,
            workflow_steps = u.workflow_steps + excluded.workflow_steps,
            worker_seconds = u.worker_seconds + excluded.worker_seconds,
            output_bytes = u.output_bytes + excluded.output_bytes;

        -- The ledger's history: the removed runs' slots of recurring jobs, as ranges (the
        -- runs the ledger reads: ledger_runs_of_job), in slot order per job.
        FOR slot_run IN
            SELECT r.job_id, r.tenant_id, r.scheduled_for, r.state
            FROM runs r JOIN jobs j ON j.id = r.job_id
            WHERE r.id = ANY(gone) AND j.kind IN ('cron', 'every')
              AND r.trigger NOT IN ('manual', 'dag') AND r.parent_run_id IS NULL
            ORDER BY r.job_id, r.scheduled_for
        LOOP
            UPDATE ledger_carried c
            SET last_slot = slot_run.scheduled_for, runs = c.runs + 1
            WHERE c.job_id = slot_run.job_id
              AND c.first_slot = (SELECT max(l.first_slot) FROM ledger_carried l
                                  WHERE l.job_id = slot_run.job_id
                                    AND l.first_slot < slot_run.scheduled_for)
              AND c.state = slot_run.state AND c.last_slot < slot_run.scheduled_for
              AND NOT EXISTS (SELECT 1 FROM runs h
                              WHERE h.job_id = slot_run.job_id AND h.parent_run_id IS NULL
                                AND h.trigger NOT IN ('manual', 'dag')
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

        -- The blobs the runs alone reference: outputs, captured logs, step outputs and signal
        -- payloads are written for one run (a fresh id each).
        blob_ids := ARRAY(SELECT DISTINCT b FROM (
            SELECT r.output_ref AS b FROM runs r WHERE r.id = ANY(gone)
            UNION ALL SELECT r.logs_ref FROM runs r WHERE r.id = ANY(gone)
            UNION ALL SELECT s.output_ref FROM run_steps s WHERE s.run_id = ANY(gone)
            UNION ALL SELECT s.output_ref FROM run_steps_set_aside s WHERE s.run_id = ANY(gone)
            UNION ALL SELECT g.payload_ref FROM run_signals g WHERE g.run_id = ANY(gone)
        ) AS refs WHERE b IS NOT NULL);

        PERFORM set_config('ostinato.removing_runs', 'on', true);
        DELETE FROM events e WHERE e.stream_id = ANY(gone) AND e.stream_type = 'run';
        PERFORM set_config('ostinato.removing_runs', '', true);

        DELETE FROM run_slots x WHERE x.run_id = ANY(gone);
        DELETE FROM attempt_leases x WHERE x.run_id = ANY(gone);
        DELETE FROM run_steps x WHERE x.run_id = ANY(gone);
        DELETE FROM run_steps_set_aside x WHERE x.run_id = ANY(gone);
        DELETE FROM run_signals x WHERE x.run_id = ANY(gone);
        DELETE FROM run_attributes x WHERE x.run_id = ANY(gone);
        DELETE FROM run_attribute_numbers x WHERE x.run_id = ANY(gone);
        DELETE FROM run_workflow_ids x WHERE x.run_id = ANY(gone);
        DELETE FROM run_holds x WHERE x.run_id = ANY(gone);
        DELETE FROM dispatch_holds x WHERE x.run_id = ANY(gone);
        DELETE FROM dead_letters x WHERE x.run_id = ANY(gone);
        DELETE FROM fan_outs x WHERE x.parent_run_id = ANY(gone);
        DELETE FROM runs x WHERE x.id = ANY(gone);

        -- A one-off job whose runs are all gone goes too, with its stream and side rows. Its
        -- top-level runs are found through runs_job_slot; its children left before their
        -- parents (child_in_hot_tables); a DAG job's node runs are not looked for, so a DAG
        -- job stays.
        jobs_gone := ARRAY(
            SELECT j.id FROM jobs j
            WHERE j.id = ANY(ARRAY(SELECT x.job FROM unnest(d_jobs, d_reasons) AS x(job, reason)
                                   WHERE x.reason IS NULL))
              AND j.kind = 'at' AND j.status IN ('completed', 'deleted')
              AND j.task NOT LIKE 'dag:%'
              AND NOT EXISTS (SELECT 1 FROM runs r
                              WHERE r.job_id = j.id AND r.parent_run_id IS NULL
                                AND r.trigger <> 'dag')
            ORDER BY j.id
            FOR UPDATE);

        -- Payloads: a removed run's, unless a job or a remaining run shares it (a job's runs
        -- share its payload, replays the replayed run's, fan-out children may share theirs);
        -- and every payload a removed job's stream named.
        blob_ids := ARRAY(SELECT DISTINCT b FROM (
            SELECT unnest(blob_ids) AS b
            UNION ALL
            SELECT p.payload FROM unnest(d_payloads, d_jobs, d_parents, d_reasons)
                AS p(payload, job, parent, reason)
            WHERE p.reason IS NULL
              AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = p.job
                                AND j.payload_ref = p.payload AND j.id <> ALL(jobs_gone))
              AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.job_id = p.job
                                AND r.parent_run_id IS NULL AND r.trigger <> 'dag'
                                AND r.payload_ref = p.payload)
              AND NOT EXISTS (SELECT 1 FROM runs r WHERE p.parent IS NOT NULL
                                AND r.parent_run_id = p.parent AND r.payload_ref = p.payload)
            UNION ALL
            SELECT (e.data ->> 'payload_ref')::uuid FROM events e
            WHERE e.stream_id = ANY(jobs_gone) AND e.stream_type = 'job'
              AND e.data ->> 'payload_ref' IS NOT NULL
            UNION ALL
            SELECT j.payload_ref FROM jobs j WHERE j.id = ANY(jobs_gone)
        ) AS refs WHERE b IS NOT NULL);

        IF cardinality(jobs_gone) > 0 THEN
            PERFORM set_config('ostinato.removing_runs', 'on', true);
            DELETE FROM events e WHERE e.stream_id = ANY(jobs_gone) AND e.stream_type = 'job';
            PERFORM set_config('ostinato.removing_runs', '', true);
            DELETE FROM job_attributes x WHERE x.job_id = ANY(jobs_gone);
            DELETE FROM job_definitions x WHERE x.job_id = ANY(jobs_gone);
            DELETE FROM job_pauses x WHERE x.job_id = ANY(jobs_gone);
            DELETE FROM occurrence_skips x WHERE x.job_id = ANY(jobs_gone);
            DELETE FROM jobs x WHERE x.id = ANY(jobs_gone);
        END IF;

        -- payload bytes, which usage counts from `blobs` (stores/usage.sql usage_bytes)
        INSERT INTO usage_carried AS u (tenant_id, hour, payload_bytes)
        SELECT b.tenant_id, date_trunc('hour', b.created_at, 'UTC'), sum(b.size_bytes)
        FROM blobs b WHERE b.id = ANY(blob_ids) AND b.kind = 'payload'
        GROUP BY 1, 2
        ON CONFLICT (tenant_id, hour) DO UPDATE SET
            payload_bytes = u.payload_bytes + excluded.payload_bytes;
        DELETE FROM blobs b WHERE b.id = ANY(blob_ids);
    END IF;

    RETURN QUERY SELECT x.id, x.reason IS NULL, x.reason
                 FROM unnest(d_ids, d_reasons) AS x(id, reason) ORDER BY x.id;
END
$$;
REVOKE ALL ON FUNCTION ostinato_remove_runs(uuid[], integer[], interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ostinato_remove_runs(uuid[], integer[], interval) TO ostinato_app;
