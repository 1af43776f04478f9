-- 0051: the retention floor is the operator's (issue 38; docs/RETENTION.md "The floor").
--
-- A tenant's `keep` was at least an hour by this table's CHECK (0045) as well as by the API.
-- The API's floor is now a setting, OSTINATO_RETENTION_FLOOR_SECONDS (default 3600), so a
-- soak benchmark (bench/soak.py) can expire runs within minutes, and only an operator who sets
-- it can: the CHECK keeps a wrong writer from a zero or negative keep, the floor is the API's
-- and the archiver's (which never removes a run before `greatest(keep, floor)` has passed).
--
-- contract: relaxing a CHECK (>= 3600 to >= 1): the previous release reads keep_seconds as a
-- number and never writes below 3600 (its API refuses it), so nothing it does changes.
ALTER TABLE tenant_retention DROP CONSTRAINT IF EXISTS tenant_retention_keep_seconds_check;
ALTER TABLE tenant_retention ADD CONSTRAINT tenant_retention_keep_seconds_positive
    CHECK (keep_seconds >= 1) NOT VALID;
ALTER TABLE tenant_retention VALIDATE CONSTRAINT tenant_retention_keep_seconds_positive;

-- The rules' function is STABLE, not IMMUTABLE: its body adds intervals to timestamptz
-- (timestamptz_pl_interval, timestamptz_mi_interval: STABLE, they depend on the time zone), and
-- PostgreSQL inlines an IMMUTABLE SQL function only when its body is immutable too. Declared
-- IMMUTABLE it was never inlined: called as a SQL function, planned at each call (about 7 ms a
-- run in the archiver's pick, bench/archive_plan.py). Its callers (the pick, ostinato_run_kept)
-- pass now(): STABLE is what it is.
ALTER FUNCTION ostinato_retention_kept(text, timestamptz, boolean, text, timestamptz, boolean,
    text, boolean, text, timestamptz, timestamptz, boolean, bigint, timestamptz, interval)
    STABLE;
