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
