-- name: record_audit
-- One attempt at a control action; recorded_at by the database clock.
INSERT INTO audit (id, tenant_id, caller_tenant_id, key_id, key_name, role, actor, request_id,
                   action, target_kind, target_id, status, outcome, detail, before, after)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16);

-- name: list_audit
-- One tenant's, newest first, keyset-paginated by (recorded_at, id) (index audit_tenant_recent).
SELECT id, tenant_id, caller_tenant_id, key_id, key_name, role, actor, request_id, action,
       target_kind, target_id, status, outcome, detail, before, after, recorded_at
FROM audit
WHERE tenant_id = $1
  AND ($2::text IS NULL OR action = $2)
  AND ($3::uuid IS NULL OR key_id = $3)
  AND ($4::text IS NULL OR target_kind = $4)
  AND ($5::text IS NULL OR target_id = $5)
  AND ($6::text IS NULL OR request_id = $6)
  AND ($7::timestamptz IS NULL OR recorded_at >= $7)
  AND ($8::timestamptz IS NULL OR recorded_at < $8)
  AND ($9::timestamptz IS NULL OR (recorded_at, id) < ($9, $10::uuid))
ORDER BY recorded_at DESC, id DESC
LIMIT $11;

-- name: list_audit_all
-- Every tenant's and those of no tenant (the admin key naming none); $1 is unused (null).
SELECT id, tenant_id, caller_tenant_id, key_id, key_name, role, actor, request_id, action,
       target_kind, target_id, status, outcome, detail, before, after, recorded_at
FROM audit
WHERE $1::uuid IS NULL
  AND ($2::text IS NULL OR action = $2)
  AND ($3::uuid IS NULL OR key_id = $3)
  AND ($4::text IS NULL OR target_kind = $4)
  AND ($5::text IS NULL OR target_id = $5)
  AND ($6::text IS NULL OR request_id = $6)
  AND ($7::timestamptz IS NULL OR recorded_at >= $7)
  AND ($8::timestamptz IS NULL OR recorded_at < $8)
  AND ($9::timestamptz IS NULL OR (recorded_at, id) < ($9, $10::uuid))
ORDER BY recorded_at DESC, id DESC
LIMIT $11;
