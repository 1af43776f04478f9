"""What each API key role may do: one table, consulted by every authenticated route.

A route names the kind of action it is (`READ`, `SUBMIT`, `OPERATE`, `MANAGE_KEYS`, `WORK`,
`READ_AUDIT`);
reads default to `READ` and writes to `OPERATE`, so a new route is never open to more roles than
an operator's by accident. The admin role is the bootstrap key's: it may do anything, and the
routes that need a tenant or the admin still say so themselves (`runtime.auth`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Final

ADMIN: Final = "admin"
OPERATOR: Final = "operator"
VIEWER: Final = "viewer"
SUBMITTER: Final = "submitter"
WORKER: Final = "worker"
# The role of keys issued before roles existed: a tenant's one key could do everything.
LEGACY_TENANT: Final = "tenant"

TENANT_ROLES: Final = (OPERATOR, VIEWER, SUBMITTER, WORKER)

READ: Final = "read"  # list and show anything of the tenant
SUBMIT: Final = "submit"  # create jobs, send signals
OPERATE: Final = "operate"  # every other change: pause, cancel, retry, replay, limits...
MANAGE_KEYS: Final = "manage_keys"  # issue, list, revoke and rotate the tenant's keys
WORK: Final = "work"  # the worker protocol (the worker gateway)
ADMINISTER: Final = "administer"  # tenants and global limits: the admin key only
# The audit trail names keys and who did what: operators and the admin, not viewers.
READ_AUDIT: Final = "read_audit"

ACTIONS: Final = (READ, SUBMIT, OPERATE, MANAGE_KEYS, WORK, ADMINISTER, READ_AUDIT)

_ALLOWED: Final[dict[str, frozenset[str]]] = {
    ADMIN: frozenset(ACTIONS),
    OPERATOR: frozenset(ACTIONS) - {ADMINISTER},
    VIEWER: frozenset({READ}),
    SUBMITTER: frozenset({SUBMIT}),
    WORKER: frozenset({WORK}),
}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who calls: the tenant (or the bootstrap admin) and the role its API key acts with."""

    tenant_id: uuid.UUID | None  # None for the bootstrap admin
    role: str  # canonical (never the one-key era's "tenant")
    name: str  # the tenant's name ("admin" for the bootstrap admin)
    key_id: uuid.UUID | None = None  # None for the bootstrap admin
    key_name: str = ""
    pools: tuple[str, ...] = field(default=())  # a worker key's pools; () = every pool


def canonical(role: str) -> str:
    """The role a stored key acts with (keys of the one-key era act as operators)."""
    return OPERATOR if role == LEGACY_TENANT else role


def may(role: str, action: str) -> bool:
    return action in _ALLOWED.get(canonical(role), frozenset())


def default_action(method: str) -> str:
    return READ if method.upper() in ("GET", "HEAD", "OPTIONS") else OPERATE


def refusal(role: str, action: str) -> str:
    """Why a key of `role` may not do `action`, for the 403 problem's detail."""
    role = canonical(role)
    if role == WORKER:
        return "a worker key may only call the worker gateway"
    if action == WORK:
        return f"a {role} key may not call the worker gateway (use a worker key)"
    if action == ADMINISTER:
        return "this call needs the admin key"
    allowed = ", ".join(sorted(_ALLOWED.get(role, ()))) or "nothing"
    return f"a {role} key may not {action.replace('_', ' ')} (it may: {allowed})"
