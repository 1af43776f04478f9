-- name: calendar_by_name
-- One calendar of one tenant.
SELECT * FROM calendars WHERE tenant_id = $1 AND name = $2;

-- name: list_calendars
-- A tenant's calendars by name.
SELECT * FROM calendars WHERE tenant_id = $1 ORDER BY name;

-- name: lock_calendar
-- Writers lock a calendar before redefining it.
SELECT id, version FROM calendars WHERE id = $1 AND tenant_id = $2 FOR UPDATE;

-- name: calendars_by_id
-- The scheduler's batch lookup of the calendars its due jobs name.
SELECT tenant_id, name, dates FROM calendars WHERE id = ANY($1::uuid[]);

-- name: calendar_names
-- Batch submission: which of these calendars exist.
SELECT name FROM calendars WHERE tenant_id = $1 AND name = ANY($2::text[]);
