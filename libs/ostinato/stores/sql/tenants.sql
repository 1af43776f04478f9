-- name: tenant_by_name
-- Tenant names are unique.
SELECT id FROM tenants WHERE name = $1;

-- name: lock_tenant
-- Writers of tenant events lock the row to read its stream version.
SELECT id, name, weight, version FROM tenants WHERE id = $1 FOR UPDATE;

-- name: tenant_weights
-- The dispatcher's names and weights of tenants.
SELECT id, name, weight FROM tenants;

-- name: tenant_name
-- The admin acting for a tenant (X-Ostinato-Tenant) names one that exists.
SELECT name FROM tenants WHERE id = $1;

-- name: tenants_page
-- The admin's list of tenants (GET /v1/tenants): newest first, keyset-paginated by
-- (created_at, id).
SELECT id, name, weight, created_at FROM tenants
WHERE ($1::timestamptz IS NULL OR (created_at, id) < ($1, $2::uuid))
ORDER BY created_at DESC, id DESC
LIMIT $3;

-- name: tenants_created_since
-- The api's Kafka ingest follows tenants as they are created (every tenant on its first read).
SELECT id, name, weight, created_at FROM tenants
WHERE $1::timestamptz IS NULL OR created_at >= $1
ORDER BY created_at, id;
