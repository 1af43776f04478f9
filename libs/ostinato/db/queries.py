"""Named SQL loaded from `.sql` files: no SQL strings in services.

A file holds blocks headed `-- name: some_query` followed by a one-line `-- why` comment; the
loader refuses duplicate names so a typo cannot silently shadow a query.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from types import MappingProxyType

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse(text: str, origin: str = "<sql>") -> Mapping[str, str]:
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sql = body.strip()
        if name in queries:
            raise ValueError(f"{origin}: query {name!r} is defined twice")
        if not sql:
            raise ValueError(f"{origin}: query {name!r} is empty")
        queries[name] = sql
    return MappingProxyType(queries)


def load(package: str, filename: str) -> Mapping[str, str]:
    """Load `package/sql/filename` as a read-only name → SQL mapping."""
    text = resources.files(package).joinpath("sql", filename).read_text(encoding="utf-8")
    return parse(text, f"{package}/sql/{filename}")


REGISTRY: list[tuple[str, str]] = [
    ("ostinato.eventlog", "eventlog.sql"),
    ("ostinato.eventlog", "readmodels.sql"),
    ("ostinato.eventlog", "controls.sql"),
    ("ostinato.eventlog", "dags.sql"),
    ("ostinato.eventlog", "start_lags.sql"),
    ("ostinato.stores", "dags.sql"),
    ("ostinato.eventlog", "outbox.sql"),
    ("ostinato.leases", "leases.sql"),
    ("ostinato.workers", "workers.sql"),
    ("ostinato.stores", "runs.sql"),
    ("ostinato.stores", "jobs.sql"),
    ("ostinato.stores", "job_edits.sql"),
    ("ostinato.stores", "attributes.sql"),
    ("ostinato.stores", "dead_letters.sql"),
    ("ostinato.stores", "calendars.sql"),
    ("ostinato.stores", "limits.sql"),
    ("ostinato.stores", "tenants.sql"),
    ("ostinato.stores", "api_keys.sql"),
    ("ostinato.stores", "steps.sql"),
    ("ostinato.stores", "signals.sql"),
    ("ostinato.stores", "fan_outs.sql"),
    ("ostinato.stores", "task_schemas.sql"),
    ("ostinato.stores", "ledger.sql"),
    ("ostinato.stores", "audit.sql"),
    ("ostinato.stores", "operations.sql"),
    ("ostinato.stores", "deadlines.sql"),
    ("ostinato.stores", "alerts.sql"),
    ("ostinato.stores", "health.sql"),
    ("ostinato.stores", "usage.sql"),
    ("ostinato.stores", "archive.sql"),
    ("ostinato.stores", "storage.sql"),
    ("ostinato.stores", "retention.sql"),
    ("ostinato.stores", "ui_sessions.sql"),
    ("ostinato.stores", "overview.sql"),
    ("ostinato.eventlog", "retention.sql"),
]


def sql_files_under(root: Path, package: str) -> list[tuple[str, str]]:
    """(package, file name) of every `sql/*.sql` inside `package` (a folder of `root`, which is on
    `sys.path`): how tests find the services' own SQL without the library importing them."""
    return sorted((".".join(f.parent.parent.relative_to(root).parts), f.name)
                  for f in (root / package).rglob("sql/*.sql"))


def all_queries(files: list[tuple[str, str]] | None = None) -> dict[str, str]:
    """Every named query of `files` (default: the shared library's `REGISTRY`), keyed by
    `package/file:name`, for the PREPARE-them-all integration test."""
    out: dict[str, str] = {}
    for package, filename in files if files is not None else REGISTRY:
        for name, sql in load(package, filename).items():
            out[f"{package}/{filename}:{name}"] = sql
    return out
