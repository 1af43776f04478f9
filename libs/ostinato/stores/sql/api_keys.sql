-- name: authenticate
-- A key that authenticates: known, and not revoked by now. The same statement notes its use,
-- at most once a minute per key (api_key_use), so authenticating costs no second round trip.
WITH k AS (
    SELECT k.id, k.tenant_id, k.role, k.name, k.pools, t.name AS tenant_name
    FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
    WHERE k.key_hash = $1 AND (k.revoked_at IS NULL OR k.revoked_at > $2)
), used AS (
    INSERT INTO api_key_use (key_id, last_used_at) SELECT id, $2 FROM k
    ON CONFLICT (key_id) DO UPDATE SET last_used_at = EXCLUDED.last_used_at
    WHERE api_key_use.last_used_at < EXCLUDED.last_used_at - interval '60 seconds'
)
SELECT id, tenant_id, role, name, pools, tenant_name FROM k;

-- name: list_keys
-- A tenant's keys, newest first, with when each was last used (never the key or its hash).
SELECT k.id, k.name, k.role, k.pools, k.created_at, k.revoked_at, u.last_used_at
FROM api_keys k LEFT JOIN api_key_use u ON u.key_id = k.id
WHERE k.tenant_id = $1
ORDER BY k.created_at DESC, k.id
LIMIT $2;

-- name: get_key
SELECT k.id, k.name, k.role, k.pools, k.created_at, k.revoked_at, u.last_used_at
FROM api_keys k LEFT JOIN api_key_use u ON u.key_id = k.id
WHERE k.tenant_id = $1 AND k.id = $2;

-- name: count_operators_left
-- Operator keys (and keys of the one-key era) that would still authenticate after $3 if key
-- $2 were revoked then: a tenant never revokes its last way in.
SELECT count(*) FROM api_keys
WHERE tenant_id = $1 AND id <> $2 AND role IN ('operator', 'tenant')
  AND (revoked_at IS NULL OR revoked_at > $3);
