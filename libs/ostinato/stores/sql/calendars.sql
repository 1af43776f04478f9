-- name: calendar_by_name
-- One calendar of one tenant.
SELECT * FROM calendars WHERE tenant_id = $1 AND name = $2;

-- name: list_calendars
-- A tenant's calendars by name.
SELECT * FROM calendars WHERE tenant_id = $1 ORDER BY name;
