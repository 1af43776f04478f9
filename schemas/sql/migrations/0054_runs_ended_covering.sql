-- 0054: the overview's runs ended per pool and hour of the day (issue 41 items 4 and 6;
-- stores/sql/overview.sql `overview_ended_hours`) read from the index alone. runs_ended (0046:
-- a tenant's finished runs by end) found the day's ends, then visited each run's row for its
-- pool, state and failures: with 1,000,000 runs of the tenant over 30 days, 32,000 rows on
-- 2,951 pages, 58-87 ms of the page's 110-170 ms (bench/ui_pages.py). The same key and
-- predicate now carry those three columns: an index-only scan wherever the visibility map has
-- the pages (a finished run's page once vacuumed; the last minutes' ends are still visited).
--
-- No entry more on the run path: a run enters it once, at its final transition, as before;
-- each entry is wider by the three columns (bench/README.md `index_cost`). Expand-only
-- (docs/UPGRADES.md): the index is re-created in this migration under its name, and the
-- previous release (0037) never read it.
DROP INDEX IF EXISTS runs_ended;
CREATE INDEX runs_ended ON runs (tenant_id, finished_at) INCLUDE (pool, state, failures)
    WHERE state IN ('succeeded', 'dead_lettered', 'cancelled');
