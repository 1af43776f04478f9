-- 0035: autovacuum keeps pace with the tables every run passes through (issue #19).
-- A run inserts and deletes a row of run_slots and attempt_leases, the outbox a row per append,
-- and every fired job and moved run leaves a dead version behind. With the defaults (a vacuum
-- once 20 % of a table is dead) run_slots held 30,000 dead rows for 1,000 live ones after a
-- 2,000-a-second minute, the dispatcher's slot queries and the scheduler's due poll stepped over
-- dead index entries (5 ms a poll): these tables are vacuumed after a fixed number of dead rows,
-- without the cost-based pauses. infra/postgres/up.sh wakes autovacuum every 10 s to match.
ALTER TABLE run_slots SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
                           autovacuum_vacuum_cost_delay = 0);
ALTER TABLE attempt_leases SET (autovacuum_vacuum_scale_factor = 0,
                                autovacuum_vacuum_threshold = 2000,
                                autovacuum_vacuum_cost_delay = 0);
ALTER TABLE outbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
                        autovacuum_vacuum_cost_delay = 0);
ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 5000,
                      autovacuum_vacuum_cost_delay = 0);
ALTER TABLE runs SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 5000,
                      autovacuum_vacuum_cost_delay = 0);
