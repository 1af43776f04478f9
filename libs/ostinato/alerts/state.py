"""Firing and resolved, per alert key: the pure decision of one evaluation. A signal whose key
is firing already changes nothing (dedup); a signal with no firing alert fires (a new episode,
also after an earlier one resolved); a firing alert of an evaluated rule whose signal is gone
resolves. Rules that were not evaluated (their query failed) resolve nothing."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable

from ostinato.alerts.rules import Signal


@dataclasses.dataclass(frozen=True, slots=True)
class Current:
    """A firing alert as stored."""

    tenant_id: str
    key: str
    rule: str


@dataclasses.dataclass(frozen=True, slots=True)
class Transition:
    status: str  # firing | resolved
    tenant_id: str
    key: str
    signal: Signal | None = None  # the signal of a firing


def transitions(firing: Iterable[Current], signals: Iterable[Signal],
                evaluated: Collection[str]) -> list[Transition]:
    """What changes: fire the new, resolve the gone (of `evaluated` rules), in a stable order."""
    now = {(s.tenant_id, s.key): s for s in signals}
    was = {(c.tenant_id, c.key): c for c in firing}
    out = [Transition("firing", t, k, s) for (t, k), s in sorted(now.items()) if (t, k) not in was]
    out += [Transition("resolved", t, k) for (t, k), c in sorted(was.items())
            if (t, k) not in now and c.rule in evaluated]
    return out
