-- 0041: a running workflow shows the step it is in (issue 40 item 5). The SDK says a step
-- started in the next request it sends anyway (the liveness ping at the latest); the gateway
-- keeps the step on the attempt's lease row, under its fencing token: the attempt's own
-- operational state, like its expiry, gone with the lease when the attempt ends or suspends.
-- Not a projection (nothing in the log to rebuild it from) and not an event: a step start
-- changes no state, nothing is decided from it, and its report (StepCompleted / StepFailed)
-- stays the step's one record. Expand only: nullable, no default (no rewrite of the table);
-- an older gateway neither writes nor reads them (its claim leaves them as they are, and the
-- reads show a step only at a position not yet recorded).
ALTER TABLE attempt_leases ADD COLUMN step_seq integer,
                           ADD COLUMN step_name text,
                           ADD COLUMN step_started_at timestamptz;
