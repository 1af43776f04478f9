"""Web UI sessions, kept in the api process's memory with an expiry.

Logging in with an API key creates a session under a random id (the cookie's value: 256 bits
from `secrets`); the process keeps only the id's SHA-256, the tenant, the key's hash (to check
on every request that the key still exists) and the session's CSRF token. The key itself is
never stored, and never sent back. A restart of the api logs everyone out; so does expiry (idle
or absolute)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field

COOKIE = "ostinato_session"
LOGIN_COOKIE = "ostinato_login"  # the login form's double-submit token (before a session exists)
IDLE_SECONDS = 60 * 60  # an hour without a request ends a session
MAX_AGE_SECONDS = 12 * 60 * 60  # and no session outlives a working day
MAX_SESSIONS = 10_000  # beyond that, the oldest is dropped first


@dataclass(slots=True)
class Session:
    tenant_id: uuid.UUID | None  # None: the admin key's session (no tenant of its own)
    tenant: str  # the tenant's name, shown in the header ("admin" for the admin key)
    role: str
    key_hash: bytes
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    created: float = field(default_factory=time.monotonic)
    seen: float = field(default_factory=time.monotonic)
    flash: str | None = None  # one message for the next page (after a POST's redirect)
    # the tenant an admin session acts for (as the API's X-Ostinato-Tenant), chosen on /ui/tenants
    acting_for: uuid.UUID | None = None

    def csrf_ok(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(token.encode(), self.csrf.encode())

    def take_flash(self) -> str | None:
        message, self.flash = self.flash, None
        return message


def _digest(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode()).digest()


class Sessions:
    def __init__(self, idle_seconds: float = IDLE_SECONDS,
                 max_age_seconds: float = MAX_AGE_SECONDS) -> None:
        self.idle = idle_seconds
        self.max_age = max_age_seconds
        self._by_digest: dict[bytes, Session] = {}
        self._lock = threading.Lock()

    def create(self, tenant_id: uuid.UUID | None, tenant: str, role: str,
               key_hash: bytes) -> tuple[str, Session]:
        session_id = secrets.token_urlsafe(32)
        session = Session(tenant_id=tenant_id, tenant=tenant, role=role, key_hash=key_hash)
        with self._lock:
            self._sweep()
            while len(self._by_digest) >= MAX_SESSIONS:
                del self._by_digest[next(iter(self._by_digest))]
            self._by_digest[_digest(session_id)] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._by_digest.get(_digest(session_id))
            if session is None:
                return None
            if now - session.seen > self.idle or now - session.created > self.max_age:
                del self._by_digest[_digest(session_id)]
                return None
            session.seen = now
            return session

    def drop(self, session_id: str | None) -> None:
        if session_id:
            with self._lock:
                self._by_digest.pop(_digest(session_id), None)

    def _sweep(self) -> None:
        now = time.monotonic()
        for digest, s in list(self._by_digest.items()):
            if now - s.seen > self.idle or now - s.created > self.max_age:
                del self._by_digest[digest]
