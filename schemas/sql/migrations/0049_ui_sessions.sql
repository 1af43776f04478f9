-- 0049: the web UI's sessions in PostgreSQL (issue 39 item 1: any api instance serves a browser).
--
-- They lived in each api process's memory (services/api/ui/sessions.py), so a browser had to
-- come back to the instance that logged it in (the k8s Service pinned it by ClientIP) and a
-- restart logged everyone out. One row a session, keyed by the SHA-256 of the cookie's random
-- token: the token itself is never stored, so reading this table opens no session. `key_hash`
-- is the opening key as `api_keys` already holds it (its SHA-256), checked again on every
-- request; for the admin key's session (no tenant) it is an HMAC of the admin key under the
-- session's token, so nothing here lets the admin key be guessed offline.
-- `expires_at` = least(created_at + the absolute limit, last_seen_at + the idle limit), judged
-- on read (a row past it opens nothing) and swept by the reconciler's retention duty.
-- Soft state, like the worker registry: not an event stream, not a read model of the log.
-- A new table only (expand-only, docs/UPGRADES.md): the previous release never reads it.
CREATE TABLE IF NOT EXISTS ui_sessions (
    token_hash   bytea       PRIMARY KEY,  -- sha256(the session token in the cookie)
    tenant_id    uuid,                     -- NULL: the admin key's session
    tenant       text        NOT NULL,     -- the tenant's name shown in the header ("admin")
    role         text        NOT NULL,     -- the opening key's role
    key_hash     bytea       NOT NULL,     -- hash_key(key), or the admin key's HMAC (above)
    csrf         text        NOT NULL,     -- the session's CSRF token (the forms' hidden field)
    acting_for   uuid,                     -- the tenant an admin session acts for
    flash        text,                     -- one message for the next page (after a redirect)
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,     -- written at most once a minute a session
    expires_at   timestamptz NOT NULL
);
-- the sweep's order (oldest expiry first, a batch at a time)
CREATE INDEX IF NOT EXISTS ui_sessions_expires_at ON ui_sessions (expires_at);
