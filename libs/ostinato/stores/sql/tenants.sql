-- name: tenant_by_key_hash
-- Authenticate an API key by its hash.
SELECT k.tenant_id, k.role, t.name FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
WHERE k.key_hash = $1;

-- name: tenant_by_name
-- Tenant names are unique.
SELECT id FROM tenants WHERE name = $1;

-- name: lock_tenant
-- Writers of tenant events lock the row to read its stream version.
SELECT id, name, weight, version FROM tenants WHERE id = $1 FOR UPDATE;

-- name: tenant_weights
-- The dispatcher's names and weights of tenants.
SELECT id, name, weight FROM tenants;
