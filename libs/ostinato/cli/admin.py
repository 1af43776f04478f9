"""The administrative commands: migrate, topics, kafka-users, rebuild-projections, schemas,
schema-dump, demo. They work on PostgreSQL, Kafka and the services' settings directly,
configured by the same `OSTINATO_*` variables as the services, and are the one module of the CLI
allowed to (an import-linter contract names it); every import is inside the command, so `--help`
and the user commands load none of it.

Their arguments are those of the argparse CLI they replaced (Makefile, infra/ and the tests
call them): `schemas --check`, `schema-dump --check`, `demo --out FILE`. (`workflows check`
is a user command, `ostinato.cli.workflows`, on the public API through the client.)
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

CheckOpt = Annotated[bool, typer.Option("--check", help="fail if the file is not current")]


def _settings() -> Any:
    from ostinato.runtime.settings import load_settings

    return load_settings()


def _exit(code: int) -> None:
    if code:
        raise typer.Exit(code)


def migrate() -> None:
    """Apply SQL migrations from schemas/sql/migrations."""
    from ostinato.db.migrate import migrate as apply

    applied = asyncio.run(apply(_settings().owner_url))  # as the owner of the schema
    print(f"migrations applied: {', '.join(applied) if applied else 'none (up to date)'}")


def topics() -> None:
    """Create the Kafka topics that are missing."""
    from ostinato.bus.kafka import ensure_topics

    s = _settings()
    created = asyncio.run(ensure_topics(s.kafka_bootstrap, s.topics.all(), s.topic_partitions,
                                        s.kafka_auth, s.kafka_replication_factor))
    print(f"topics: {', '.join(s.topics.all())} (created now: {len(created)})")


def kafka_users(
    file: Annotated[Path, typer.Option("--file", help="the services' SCRAM passwords (JSON, "
                                       "kept 0600): read if there, else written")],
) -> None:
    """Give each service its own Kafka SCRAM user with only the ACLs it needs (docs/KAFKA.md),
    on the broker this command reaches as a super user (OSTINATO_KAFKA_BOOTSTRAP)."""
    from ostinato.bus import access

    s = _settings()
    known = json.loads(file.read_text()) if file.exists() else {}
    users = {service: {"username": access.service_user(s.topics, service),
                       "password": known.get(service, {}).get("password")
                       or access.new_password()}
             for service in access.SERVICES}

    async def grant_all() -> None:
        for service, user in users.items():
            await access.grant(s.kafka_bootstrap, user=user["username"],
                               password=user["password"],
                               acls=access.service_acls(s.topics, service), auth=s.kafka_auth)

    asyncio.run(grant_all())
    file.parent.mkdir(parents=True, exist_ok=True)
    file.touch(mode=0o600)
    file.write_text(json.dumps(users, indent=2) + "\n")
    print(f"kafka users: {', '.join(u['username'] for u in users.values())} "
          f"(passwords in {file})")


async def _rebuild() -> int:
    import asyncpg

    from ostinato.db.pool import _init_connection
    from ostinato.eventlog.rebuild import rebuild

    conn = await asyncpg.connect(_settings().owner_url)  # TRUNCATEs the read models
    try:
        await _init_connection(conn)
        return await rebuild(conn)
    finally:
        await conn.close()


def rebuild_projections() -> None:
    """Recompute read models from the event log."""
    print(f"read models rebuilt from {asyncio.run(_rebuild())} events")


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


def schemas(check: CheckOpt = False) -> None:
    """Write schemas/events/catalogue.json (the event catalogue's JSON Schema)."""
    from ostinato.db.migrate import MIGRATIONS_DIR
    from ostinato.domain.events import json_schema

    target = MIGRATIONS_DIR.parents[1] / "events" / "catalogue.json"
    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    _exit(_pin(target, text, check, "ostinato schemas"))


def schema_dump(check: CheckOpt = False) -> None:
    """Write schemas/sql/schema.sql (pg_dump of the migrations applied to a scratch
    database)."""
    from ostinato.db.schema_dump import SCHEMA_FILE, migrated_schema

    text = asyncio.run(migrated_schema(_settings().owner_url))
    _exit(_pin(SCHEMA_FILE, text, check, "ostinato schema-dump"))


def demo(out: Annotated[Path | None, typer.Option(
        help="also write the tenant and key to this file")] = None) -> None:
    """Create the demo tenant and jobs through the API."""
    from ostinato.demo import bootstrap_demo

    s = _settings()
    info = asyncio.run(bootstrap_demo(f"http://{s.api_host}:{s.api_port}", s.admin_key))
    text = json.dumps(info, indent=2) + "\n"
    if out is not None:
        out.write_text(text)
    print(text, end="")


def register(app: typer.Typer) -> None:
    """Add the admin commands to the root app, under their historical names."""
    panel = "Administration (database, Kafka, schemas)"
    app.command(rich_help_panel=panel)(migrate)
    app.command(rich_help_panel=panel)(topics)
    app.command("kafka-users", rich_help_panel=panel)(kafka_users)
    app.command("rebuild-projections", rich_help_panel=panel)(rebuild_projections)
    app.command(rich_help_panel=panel)(schemas)
    app.command("schema-dump", rich_help_panel=panel)(schema_dump)
    app.command(rich_help_panel=panel)(demo)
