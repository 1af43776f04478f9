"""Topic names and routing: which logged events travel on which topic, keyed by tenant.

Every topic is keyed by tenant id, so one tenant's messages stay in order on one partition and
tenants spread across partitions. An optional prefix isolates test runs on a shared broker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ostinato.domain import events as ev
from ostinato.domain.names import POOL_NAME


def logical_name(topic: str) -> str:
    """A topic's name without whatever prefix precedes `ostinato.` (metric labels, where the
    `Topics` holding the prefix is not at hand)."""
    at = topic.find("ostinato.")
    return topic[at:] if at > 0 else topic


@dataclass(frozen=True)
class Topics:
    prefix: str = ""
    pools: tuple[str, ...] = ("default",)
    partitions: int = 12

    @property
    def due(self) -> str:
        return f"{self.prefix}ostinato.runs.due"

    @property
    def finished(self) -> str:
        return f"{self.prefix}ostinato.runs.finished"

    def ready(self, pool: str) -> str:
        if not POOL_NAME.match(pool):
            raise ValueError(f"invalid pool name {pool!r}")
        return f"{self.prefix}ostinato.runs.ready.{pool}"

    def submit(self, tenant_id: object) -> str:
        """Where a tenant's own producers write jobs (its SCRAM user may write nothing else)."""
        return f"{self.prefix}ostinato.submit.{tenant_id}"

    def rejects(self, tenant_id: object) -> str:
        """Where the api puts a tenant's submissions it could not accept, with the problem."""
        return f"{self.prefix}ostinato.rejects.{tenant_id}"

    def submit_tenant(self, topic: str) -> str | None:
        """The tenant id a submit topic belongs to (from its name, never from the message)."""
        head = f"{self.prefix}ostinato.submit."
        rest = topic.removeprefix(head)
        return rest if rest != topic and re.fullmatch(r"[0-9a-f-]{36}", rest) else None

    def all(self) -> list[str]:
        return [self.due, self.finished, *(self.ready(p) for p in self.pools)]

    def logical(self, topic: str) -> str:
        """The topic name without the prefix, for metric labels."""
        return topic.removeprefix(self.prefix)

    def route(self, event: ev.Event) -> str | None:
        """The topic a logged event is published on, or None if it stays in the log (a lookup
        by the event's class: an event of every kind passes here, five a run)."""
        match _ROUTES.get(type(event)):
            case "due":
                return self.due
            case "ready":
                return self.ready(event.pool)  # type: ignore[attr-defined]
            case "finished":
                return self.finished  # a slot is free
            case _:
                return None


_ROUTES: dict[type[ev.Event], str] = {
    **dict.fromkeys((ev.RunScheduled, ev.RetryDue, ev.RunRepublished, ev.RunWoken,
                     ev.RunReopened), "due"),
    ev.RunQueued: "ready",
    **dict.fromkeys((ev.RunSucceeded, ev.RunFailed, ev.AttemptTimedOut, ev.LeaseExpired,
                     ev.LeaseReleased, ev.RunCancelled, ev.RunDeadLettered, ev.RunSuspended,
                     ev.RunMarkedSucceeded), "finished"),
}


def tenant_key(tenant_id: object) -> bytes:
    return str(tenant_id).encode()
