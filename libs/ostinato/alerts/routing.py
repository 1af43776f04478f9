"""Routing: an alert about a job goes to the tenant's sinks that name the job's owner; when
none does (no owner, or an owner without a sink), to the tenant's default sinks."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True, slots=True)
class Sink:
    name: str
    owners: tuple[str, ...]
    is_default: bool


def route(owner: str | None, sinks: Iterable[Sink]) -> list[str]:
    """The names of the sinks an alert with `owner` goes to, sorted."""
    sinks = list(sinks)
    owned = sorted(s.name for s in sinks if owner is not None and owner in s.owners)
    return owned or sorted(s.name for s in sinks if s.is_default)
