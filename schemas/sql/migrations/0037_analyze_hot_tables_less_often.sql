-- 0037: the tables every run writes are analysed after half of them changed, not a tenth.
-- `events` grows by six rows a run, `runs` changes four times a run and `jobs` once a fire; at
-- the default (10 % changed) autovacuum's worker, woken every 10 s (infra/postgres/up.sh),
-- analysed all three on nearly every wake-up at 2,500 runs/s, about half a second of one core
-- each time (jobs 0.27 s, events 0.16 s, runs 0.07-0.21 s). On 2 cores busy at 1.6 that left a
-- backlog which was the start lag's p99 (bench/README.md, issue 19, seventh pass). Their
-- reads do not lean on fresh statistics: the log is read by its unique keys, and the due poll
-- and the dispatcher's snapshot descend their partial indexes in order with a LIMIT whatever
-- the statistics say (the due poll plans each execution for its parameters). Vacuum
-- thresholds (0035) are unchanged: dead rows are still removed as often.
ALTER TABLE events SET (autovacuum_analyze_scale_factor = 0.5);
ALTER TABLE runs SET (autovacuum_analyze_scale_factor = 0.5);
ALTER TABLE jobs SET (autovacuum_analyze_scale_factor = 0.5);
