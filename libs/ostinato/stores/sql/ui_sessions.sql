-- name: ui_session_create
-- A login's session (migration 0049); $7: the clock's instant (NULL: the database's now()).
INSERT INTO ui_sessions (token_hash, tenant_id, tenant, role, key_hash, csrf, created_at,
                         last_seen_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, coalesce($7::timestamptz, now()),
        coalesce($7::timestamptz, now()),
        coalesce($7::timestamptz, now()) + least($8::interval, $9::interval));

-- name: ui_session_touch
-- A page's read of its session: the row if not expired by $2, and in the same statement its
-- expiry pushed on (idle $3, absolute $4), written only when last seen over $5 ago, so a page
-- costs one round trip and most pages write nothing.
WITH t AS (SELECT coalesce($2::timestamptz, now()) AS now),
live AS (
    SELECT s.token_hash, s.tenant_id, s.tenant, s.role, s.key_hash, s.csrf, s.acting_for,
           s.flash, s.last_seen_at
    FROM ui_sessions s, t WHERE s.token_hash = $1 AND s.expires_at > t.now
), touched AS (
    UPDATE ui_sessions s
    SET last_seen_at = t.now,
        expires_at = least(s.created_at + $4::interval, t.now + $3::interval)
    FROM live, t
    WHERE s.token_hash = live.token_hash AND live.last_seen_at < t.now - $5::interval
    RETURNING s.token_hash
)
SELECT tenant_id, tenant, role, key_hash, csrf, acting_for, flash FROM live;

-- name: ui_session_save
-- What a request changed in its session: the flash ($3 says whether) and the tenant an admin
-- session acts for ($5 says whether); a field the request did not change is left as it is.
UPDATE ui_sessions
SET flash = CASE WHEN $3 THEN $2 ELSE flash END,
    acting_for = CASE WHEN $5 THEN $4 ELSE acting_for END
WHERE token_hash = $1;

-- name: ui_session_drop
-- Log out, or a session whose key is gone, revoked or changed.
DELETE FROM ui_sessions WHERE token_hash = $1;

-- name: ui_sessions_expire
-- The reconciler's sweep: up to $2 sessions expired by $1 (NULL: now()), oldest expiry first.
DELETE FROM ui_sessions
WHERE token_hash IN (SELECT token_hash FROM ui_sessions
                     WHERE expires_at <= coalesce($1::timestamptz, now())
                     ORDER BY expires_at LIMIT $2);
