"""Route handlers for a tenant's API keys: issue one per use (an operator's, a dashboard's
viewer, a producer's submitter, each worker fleet's), list them with their last use, revoke and
rotate. A key's secret is in the answer that issues it and nowhere else, ever."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from litestar import delete, get, post
from litestar.params import FromPath, JSONBody

from ostinato import tenancy
from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.stores import api_keys
from ostinato.wire.api import (
    IssuedKeyView,
    KeyRequest,
    Keys,
    KeyView,
    RotatedKeyView,
    RotateRequest,
)
from services.api.auditing import audited
from services.api.scope import Tenant

KEYS = {"action": roles.MANAGE_KEYS}  # listing keys too: viewers see no key management

def _view(row: api_keys.KeyRow, now: datetime) -> KeyView:
    return KeyView(id=row.id, name=row.name, role=roles.canonical(row.role), pools=row.pools,
                   created_at=row.created_at,
                   active=row.revoked_at is None or row.revoked_at > now,
                   revoked_at=row.revoked_at, last_used_at=row.last_used_at)


def _issued(k: tenancy.IssuedKey) -> IssuedKeyView:
    return IssuedKeyView(id=k.key_id, name=k.name, role=k.role, pools=k.pools, key=k.key)


def _described(k: tenancy.IssuedKey) -> dict[str, object]:
    """A key as its audit row shows it (never its secret)."""
    return {"key_id": str(k.key_id), "name": k.name, "role": k.role, "pools": k.pools}


@post("/v1/keys", status_code=201, tags=["keys"], opt=audited("key.issue", "key", **KEYS))
async def issue_key(data: JSONBody[KeyRequest], tenant: Tenant) -> IssuedKeyView:
    """Issue a key with a role: operator (everything on the tenant), viewer (read only),
    submitter (create jobs, send signals), worker (the worker gateway, optionally some pools)."""
    unknown = sorted(set(data.pools) - set(tenant.settings.pool_names))
    if unknown:
        raise InvalidInput(f"unknown pool(s) {', '.join(unknown)}", errors=[{
            "field": "pools", "message": f"known: {', '.join(tenant.settings.pool_names)}"}])
    issued = await tenancy.issue_key(tenant.conn, tenant.store, tenant.tenant_id,
                                     name=data.name, role=data.role,
                                     pools=sorted(set(data.pools)), actor=tenant.actor)
    tenant.audit.target_id, tenant.audit.after = str(issued.key_id), _described(issued)
    return _issued(issued)


@get("/v1/keys", tags=["keys"], opt=KEYS)
async def list_keys(tenant: Tenant) -> Keys:
    """The tenant's keys, newest first, revoked ones too (never a secret or a hash)."""
    now = tenant.clock.now()
    rows = await api_keys.list_keys(tenant.conn, tenant.tenant_id)
    return Keys(keys=[_view(r, now) for r in rows])


@get("/v1/keys/{key_id:uuid}", tags=["keys"], opt=KEYS)
async def get_key(key_id: FromPath[uuid.UUID], tenant: Tenant) -> KeyView:
    row = await api_keys.get_key(tenant.conn, tenant.tenant_id, key_id)
    if row is None:
        raise NotFound(f"no API key {key_id}")
    return _view(row, tenant.clock.now())


@delete("/v1/keys/{key_id:uuid}", status_code=204, tags=["keys"],
        opt=audited("key.revoke", "key", "key_id", **KEYS))
async def revoke_key(key_id: FromPath[uuid.UUID], tenant: Tenant) -> None:
    """Revoke now (the worker gateway may accept a key it authenticated for 10 s more). The
    tenant's last operator key cannot be revoked: 409."""
    row = await tenancy.revoke_key(tenant.conn, tenant.store, tenant.tenant_id, key_id,
                                   now=tenant.clock.now(), actor=tenant.actor)
    tenant.audit.before = {"name": row.name, "role": roles.canonical(row.role), "active": True}
    tenant.audit.after = {"active": False}


@post("/v1/keys/{key_id:uuid}/rotate", status_code=201, tags=["keys"],
      opt=audited("key.rotate", "key", "key_id", **KEYS))
async def rotate_key(key_id: FromPath[uuid.UUID], tenant: Tenant,
                     data: JSONBody[RotateRequest | None] = None) -> RotatedKeyView:
    """A new key with the same name, role and pools; the old one works for `grace_seconds`."""
    grace = timedelta(seconds=(data or RotateRequest()).grace_seconds)
    issued, ends = await tenancy.rotate_key(tenant.conn, tenant.store, tenant.tenant_id,
                                            key_id, now=tenant.clock.now(), grace=grace,
                                            actor=tenant.actor)
    tenant.audit.after = {**_described(issued), "old_key_expires_at": ends.isoformat()}
    return RotatedKeyView(key=_issued(issued), old_key_id=key_id, old_key_expires_at=ends)


ROUTES = [issue_key, list_keys, get_key, revoke_key, rotate_key]
