-- name: steps_of_run
-- A run's recorded workflow steps after position $3, in order, a page at a time: one descent
-- of the primary key (run_id, seq), whatever the length of the history.
SELECT seq, name, succeeded, output, output_ref, error_type, message, attempt, tries,
       duration_ms, recorded_at, supplied_by
FROM run_steps
WHERE run_id = $1 AND tenant_id = $2 AND seq > $3
ORDER BY seq
LIMIT $4;

-- name: set_aside_steps_of_run
-- The records operator interventions set aside (StepRetried, StepSkipped, RunRestarted), in
-- the order they were set aside, then by position, a page at a time after the cursor ($3, $4)
-- (one descent of the primary key (run_id, set_aside_version, seq)).
SELECT set_aside_version, seq, name, succeeded, output, output_ref, error_type, message,
       attempt, tries, duration_ms, recorded_at, supplied_by, set_aside_at
FROM run_steps_set_aside
WHERE run_id = $1 AND tenant_id = $2 AND (set_aside_version, seq) > ($3, $4)
ORDER BY set_aside_version, seq
LIMIT $5;

-- name: undone_by_set_aside
-- The steps before position $2 whose compensation (`compensate:<step>`) completed at a position
-- from $2 on: setting those records aside would replay a step that was undone.
SELECT DISTINCT kept.name
FROM run_steps comp
JOIN run_steps kept ON kept.run_id = comp.run_id AND kept.seq < $2
                   AND kept.name = substr(comp.name, length('compensate:') + 1)
WHERE comp.run_id = $1 AND comp.seq >= $2 AND comp.succeeded
  AND comp.name LIKE 'compensate:%'
ORDER BY kept.name;

-- name: state_of_run
-- The latest value of each name a workflow published (`ctx.set`: steps named `set:<name>`),
-- through the partial index run_steps_state; $3 NULL: every name, else that one.
SELECT DISTINCT ON (name) substr(name, 5) AS name, output AS value, seq, recorded_at AS set_at
FROM run_steps
WHERE run_id = $1 AND tenant_id = $2 AND left(name, 4) = 'set:'
  AND ($3::text IS NULL OR name = 'set:' || $3::text)
ORDER BY name, seq DESC;

-- name: reply_of_run
-- The recorded answer to one update (a step named `reply:<update id>`), through the partial
-- index run_steps_replies.
SELECT output, seq, recorded_at
FROM run_steps
WHERE run_id = $1 AND tenant_id = $2 AND left(name, 6) = 'reply:' AND name = $3;
