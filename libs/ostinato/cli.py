"""`ostinato` administrative commands: migrate, topics, rebuild-projections, schemas,
schema-dump, demo.

Configuration comes from the same `OSTINATO_*` variables as the services.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from ostinato.db.migrate import MIGRATIONS_DIR, migrate


def _settings() -> Any:  # imported lazily so `--help` stays fast
    from ostinato.runtime.settings import load_settings

    return load_settings()


async def _migrate() -> None:
    applied = await migrate(_settings().database_url)
    print(f"migrations applied: {', '.join(applied) if applied else 'none (up to date)'}")


async def _topics() -> None:
    from ostinato.bus.kafka import ensure_topics

    s = _settings()
    created = await ensure_topics(s.kafka_bootstrap, s.topics.all(), s.topic_partitions)
    print(f"topics: {', '.join(s.topics.all())} (created now: {len(created)})")


async def _rebuild() -> None:
    import asyncpg

    from ostinato.db.pool import _init_connection
    from ostinato.eventlog.rebuild import rebuild

    conn = await asyncpg.connect(_settings().database_url)
    try:
        await _init_connection(conn)
        folded = await rebuild(conn)
    finally:
        await conn.close()
    print(f"read models rebuilt from {folded} events")


def _pin(target: Path, text: str, check: bool, command: str) -> int:
    """Write `text` to the committed file `target`; with `check`, fail unless it holds it."""
    if check:
        if not target.exists() or target.read_text() != text:
            print(f"{target} is out of date: run `{command}`", file=sys.stderr)
            return 1
        print(f"{target} is current")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    print(f"wrote {target}")
    return 0


def _schemas(check: bool) -> int:
    from ostinato.domain.events import json_schema

    target = MIGRATIONS_DIR.parents[1] / "events" / "catalogue.json"
    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    return _pin(target, text, check, "ostinato schemas")


def _schema_dump(check: bool) -> int:
    from ostinato.db.schema_dump import SCHEMA_FILE, migrated_schema

    text = asyncio.run(migrated_schema(_settings().database_url))
    return _pin(SCHEMA_FILE, text, check, "ostinato schema-dump")


async def _demo(out: Path | None) -> None:
    from ostinato.demo import bootstrap_demo

    s = _settings()
    info = await bootstrap_demo(f"http://{s.api_host}:{s.api_port}", s.admin_key)
    text = json.dumps(info, indent=2) + "\n"
    if out is not None:
        await asyncio.to_thread(out.write_text, text)
    print(text, end="")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ostinato", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("migrate", help="apply SQL migrations from schemas/sql/migrations")
    sub.add_parser("topics", help="create the Kafka topics that are missing")
    sub.add_parser("rebuild-projections", help="recompute read models from the event log")
    schemas = sub.add_parser("schemas", help="write schemas/events/catalogue.json")
    schemas.add_argument("--check", action="store_true", help="fail if the file is not current")
    dump = sub.add_parser("schema-dump", help="write schemas/sql/schema.sql (pg_dump of the "
                                              "migrations applied to a scratch database)")
    dump.add_argument("--check", action="store_true", help="fail if the file is not current")
    demo = sub.add_parser("demo", help="create the demo tenant and jobs through the API")
    demo.add_argument("--out", type=Path, help="also write the tenant and key to this file")
    args = parser.parse_args(argv)
    match args.command:
        case "migrate":
            asyncio.run(_migrate())
        case "topics":
            asyncio.run(_topics())
        case "rebuild-projections":
            asyncio.run(_rebuild())
        case "schemas":
            return _schemas(args.check)
        case "schema-dump":
            return _schema_dump(args.check)
        case "demo":
            asyncio.run(_demo(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
