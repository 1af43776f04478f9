-- 0032: a DAG job's completion deadline is its DAG run's (issue #21): the run of an occurrence
-- of a DAG job is its DAG run, not any of its node runs. `completion_overdue`, set by the
-- projector of `CompletionOverdue` like the runs' own, so the deadline check looks at each
-- breached DAG run once. The check finds a job's occurrences by slot through dag_runs_job_slot
-- (and runs_job_slot for plain runs).
ALTER TABLE dag_runs ADD COLUMN completion_overdue boolean NOT NULL DEFAULT false;
