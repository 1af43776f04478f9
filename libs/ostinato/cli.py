"""`ostinato` administrative commands: migrate, topics, rebuild-projections, schemas,
schema-dump, demo, workflows check.

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
    workflows = sub.add_parser("workflows", help="workflow tools (the pre-deploy check)")
    wsub = workflows.add_subparsers(dest="workflows_command", required=True)
    check = wsub.add_parser(
        "check", help="replay in-flight runs against new workflow code, running no step",
        description="Replay the recorded steps of every in-flight run of the module's "
                    "workflows against their new code (no step runs) and list each run that "
                    "would meet a non-determinism error. Exit 0: all compatible; 1: some "
                    "incompatible; 2: usage or connection error.")
    _check_arguments(check)
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
        case "workflows":
            from ostinato.sdk.check import check_command

            return check_command(args)
    return 0


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `workflows check`, declared here so `--help` imports no SDK code (keep
    them in step with `ostinato.sdk.check.check_command`, which reads them)."""
    parser.add_argument("module", help="the new code: an importable module (myapp.workflows) "
                                       "or a .py file; its module-level @workflow tasks are "
                                       "checked")
    parser.add_argument("--api", metavar="URL", help="the Ostinato API (default: "
                        "$OSTINATO_API_URL, else http://127.0.0.1:8080)")
    parser.add_argument("--key", help="a tenant API key (default: $OSTINATO_API_KEY)")
    parser.add_argument("--task", action="append", default=[], metavar="NAME",
                        help="check only this workflow (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--all", action="store_true",
                        help="list compatible runs too (default: only the others)")
    parser.add_argument("--all-versions", action="store_true",
                        help="also fail on runs pinned to another handler version than the "
                             "new code's (by default they stay with their own version's "
                             "workers and are only listed)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 on warnings too (ends_early, raises, unchecked)")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="longest replay of one run (default 10)")


if __name__ == "__main__":
    sys.exit(main())
