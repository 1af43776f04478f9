-- 0025: several keys per tenant, each with an id, a name, a role (ostinato.domain.roles) and,
-- for worker keys, the pools it may serve; a key is revoked (ApiKeyRevoked) at `revoked_at`,
-- which a rotation sets in the future (its grace period). Keys of the one-key era keep role
-- 'tenant' (an operator) and get the id their hash derives (the first 16 bytes), the same id
-- the projector gives them on a rebuild. When a key was last used is no fact of the log: it
-- lives in api_key_use, written at most once a minute per key by authentication.
ALTER TABLE api_keys
    ADD COLUMN id         uuid,
    ADD COLUMN name       text        NOT NULL DEFAULT '',
    ADD COLUMN pools      text[]      NOT NULL DEFAULT '{}',
    ADD COLUMN revoked_at timestamptz;
UPDATE api_keys SET id = encode(substring(key_hash FROM 1 FOR 16), 'hex')::uuid;
ALTER TABLE api_keys ALTER COLUMN id SET NOT NULL;
CREATE UNIQUE INDEX api_keys_id ON api_keys (id);

CREATE TABLE api_key_use (
    key_id       uuid        PRIMARY KEY,
    last_used_at timestamptz NOT NULL
);
