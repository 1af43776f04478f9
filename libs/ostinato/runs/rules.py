"""What a child run may ask for (`ctx.child`, `ctx.fan_out`'s chunks): the rules a gateway is
configured with, and the settings a child gets from them and from its parent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from ostinato.domain.errors import InvalidInput
from ostinato.policy import retry
from ostinato.stores.runs import LockedRun


@dataclass(frozen=True, slots=True)
class ChildRules:
    """What a child may ask for: the configured pools and priority classes (empty: the parent's
    only), the pools' default retry policies and the payload size limit."""

    pools: frozenset[str] = frozenset()
    classes: frozenset[str] = frozenset()
    pool_retry: dict[str, retry.RetryPolicy] = field(default_factory=dict)
    max_payload_bytes: int = 262_144


def settings(parent: LockedRun, pool: str | None, priority: str | None, retry_doc: Any,
             timeout_seconds: float | None, rules: ChildRules, prefix: str,
             ) -> tuple[str, str, retry.RetryPolicy, list[dict[str, str]]]:
    """Pure: the pool, priority class and retry policy a child run of `parent` gets (unset:
    the parent's, the pool's default policy), and the problems with what was asked, each
    naming its field under `prefix` (a child, a fan-out's chunks)."""
    pool = pool or parent.pool
    priority = priority or parent.priority
    errors: list[dict[str, str]] = []
    if pool != parent.pool and pool not in rules.pools:
        errors.append({"field": f"{prefix}.pool", "message": "unknown pool"})
    if priority != parent.priority and priority not in rules.classes:
        errors.append({"field": f"{prefix}.priority", "message": "unknown priority class"})
    if timeout_seconds is not None and timeout_seconds <= 0:
        errors.append({"field": f"{prefix}.timeout_seconds", "message": "must be positive"})
    policy = rules.pool_retry.get(pool, retry.DEFAULT)
    if retry_doc is not None:
        try:
            policy = retry.parse_retry(msgspec.convert(retry_doc, retry.RetrySpec),
                                       f"{prefix}.retry")
        except (InvalidInput, msgspec.ValidationError) as exc:
            errors.append({"field": f"{prefix}.retry", "message": str(exc)})
    return pool, priority, policy, errors

