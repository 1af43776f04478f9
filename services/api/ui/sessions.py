"""Web UI sessions, kept in PostgreSQL (`ui_sessions`, `ostinato.stores.ui_sessions`) with an
expiry, so any api instance serves a browser whichever one logged it in, and a restart or a
rolling upgrade logs nobody out (issue 39).

Logging in with an API key creates a session under a random token (the cookie's value: 256
bits from `secrets`); the database keeps only the token's SHA-256, the tenant, the key's hash
(to check on every request that the key still exists) and the session's CSRF token. The key
itself is never stored, and never sent back. A session ends at logout, when its key goes, or
at expiry (idle or absolute), judged on every read by the request's clock; the reconciler's
retention duty deletes what expired."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.stores import ui_sessions
from ostinato.stores.api_keys import hash_key

COOKIE = "ostinato_session"
LOGIN_COOKIE = "ostinato_login"  # the login form's double-submit token (before a session exists)
IDLE_SECONDS = 60 * 60  # an hour without a request ends a session
MAX_AGE_SECONDS = 12 * 60 * 60  # and no session outlives a working day
TOUCH_SECONDS = 60  # a session's last use is written at most this often


@dataclass(slots=True)
class Session:
    tenant_id: uuid.UUID | None  # None: the admin key's session (no tenant of its own)
    tenant: str  # the tenant's name, shown in the header ("admin" for the admin key)
    role: str
    key_hash: bytes  # hash_key(key); for the admin key, admin_proof(token, key)
    csrf: str
    flash: str | None = None  # one message for the next page (after a POST's redirect)
    # the tenant an admin session acts for (as the API's X-Ostinato-Tenant), chosen on /ui/tenants
    acting_for: uuid.UUID | None = None
    # (flash, acting_for) as read: what `Sessions.save` compares to write only a change
    read: tuple[str | None, uuid.UUID | None] = field(default=(None, None), repr=False)

    def csrf_ok(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(token.encode(), self.csrf.encode())

    def take_flash(self) -> str | None:
        message, self.flash = self.flash, None
        return message


def digest(session_id: str) -> bytes:
    """How a session is found: the token's SHA-256 (the token is never stored)."""
    return hashlib.sha256(session_id.encode()).digest()


def admin_proof(session_id: str, admin_key: str) -> bytes:
    """What an admin key's session keeps of the key: an HMAC under the session's token, which
    only the browser holds, so the table gives nothing to guess the admin key from offline (a
    tenant's key is kept as `api_keys` keeps it)."""
    return hmac.new(session_id.encode(), admin_key.encode(), hashlib.sha256).digest()


class Sessions:
    """The sessions' expiry rules over the shared table: one instance per app."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS,
                 max_age_seconds: float = MAX_AGE_SECONDS,
                 touch_seconds: float = TOUCH_SECONDS) -> None:
        self.idle = timedelta(seconds=idle_seconds)
        self.max_age = timedelta(seconds=max_age_seconds)
        self.touch_every = timedelta(seconds=touch_seconds)

    async def create(self, conn: asyncpg.Connection, clock: Clock, tenant_id: uuid.UUID | None,
                     tenant: str, role: str, key: str) -> tuple[str, Session]:
        """A new session for `key` (already authenticated); its token, for the cookie."""
        session_id = secrets.token_urlsafe(32)
        key_hash = admin_proof(session_id, key) if tenant_id is None else hash_key(key)
        session = Session(tenant_id=tenant_id, tenant=tenant, role=role, key_hash=key_hash,
                          csrf=secrets.token_urlsafe(32))
        await ui_sessions.create(
            conn, digest(session_id),
            ui_sessions.SessionRow(tenant_id=tenant_id, tenant=tenant, role=role,
                                   key_hash=key_hash, csrf=session.csrf, acting_for=None,
                                   flash=None),
            clock.db_now(), idle=self.idle, max_age=self.max_age)
        return session_id, session

    async def get(self, conn: asyncpg.Connection, clock: Clock,
                  session_id: str | None) -> Session | None:
        """The live session under this token (None: none, or expired), its use noted."""
        if not session_id:
            return None
        row = await ui_sessions.touch(conn, digest(session_id), clock.db_now(), idle=self.idle,
                                      max_age=self.max_age, every=self.touch_every)
        if row is None:
            return None
        return Session(tenant_id=row.tenant_id, tenant=row.tenant, role=row.role,
                       key_hash=row.key_hash, csrf=row.csrf, flash=row.flash,
                       acting_for=row.acting_for, read=(row.flash, row.acting_for))

    async def save(self, conn: asyncpg.Connection, session_id: str, session: Session) -> None:
        """Write what the request changed (a flash set or shown, the tenant acted for), if
        anything, before its answer leaves: the next page may be served by another instance."""
        flash_changed = session.flash != session.read[0]
        acting_changed = session.acting_for != session.read[1]
        if flash_changed or acting_changed:
            await ui_sessions.save(conn, digest(session_id), flash=session.flash,
                                   flash_changed=flash_changed, acting_for=session.acting_for,
                                   acting_changed=acting_changed)
            session.read = (session.flash, session.acting_for)

    async def drop(self, conn: asyncpg.Connection, session_id: str | None) -> None:
        if session_id:
            await ui_sessions.drop(conn, digest(session_id))
