"""What an operation's filter selects, per kind: the arguments of its count and freeze queries
(`stores/sql/operations.sql`), or a 400 naming the field. Pure: no database here.

cancel selects unfinished runs, retry the runs a re-run accepts (failed, cancelled,
dead-lettered; dead-lettered unless `states` says otherwise, as `ostinato runs retry`), replay
dead letters, pause active jobs. A field of another kind's selection is refused, never ignored:
a filter that silently widened would act on more than the operator meant."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ostinato.domain import attributes
from ostinato.domain.errors import InvalidInput
from ostinato.wire.api import FINAL_STATES, RUN_STATES, OperationFilter

RUN_FIELDS = frozenset({"states", "job_id", "task", "pool", "since", "until", "where"})
FIELDS = {
    "cancel": RUN_FIELDS,
    "retry": RUN_FIELDS,
    "replay": frozenset({"job_id", "error_type", "triage_state"}),
    "pause": frozenset({"task", "pool"}),
}
CANCELLABLE = tuple(s for s in RUN_STATES if s not in FINAL_STATES)
RERUNNABLE = ("failed", "cancelled", "dead_lettered")
STATES_OF = {"cancel": CANCELLABLE, "retry": RERUNNABLE}
DEFAULT_STATES = {"cancel": CANCELLABLE, "retry": ("dead_lettered",)}


def _bad(field: str, message: str) -> InvalidInput:
    return InvalidInput(f"filter.{field}: {message}",
                        errors=[{"field": f"filter.{field}", "message": message}])


def given(f: OperationFilter) -> dict[str, Any]:
    """The fields the filter sets, as JSON values (what the operation records)."""
    return msgspec.to_builtins(f)


def selection(kind: str, f: OperationFilter,
              declared: Mapping[str, str] | None = None) -> tuple[Any, ...]:
    """The query arguments after the tenant id for `kind`'s selection; `declared`: the
    tenant's search attributes (name → type), which `where` expressions are parsed against
    into bind parameters (`ostinato.domain.attributes.parse_where`)."""
    for name in given(f):
        if name not in FIELDS[kind]:
            raise _bad(name, f"not a filter of a {kind} operation (it takes: "
                             f"{', '.join(sorted(FIELDS[kind]))})")
    if kind in ("cancel", "retry"):
        states = list(dict.fromkeys(f.states)) if f.states else list(DEFAULT_STATES[kind])
        for s in states:
            if s not in STATES_OF[kind]:
                raise _bad("states", f"a {kind} operation acts on runs that are "
                                     f"{', '.join(STATES_OF[kind])}, not {s!r}")
        if f.since is not None and f.until is not None and f.since >= f.until:
            raise _bad("until", "must be after since")
        where = attributes.parse_where(f.where, declared or {})
        return (states, f.job_id, f.task, f.pool, f.since, f.until, bool(where),
                *attributes.bind_args(where))
    if kind == "replay":
        return f.job_id, f.error_type, f.triage_state
    return "active", f.task, f.pool  # pause
