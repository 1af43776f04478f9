"""Write or check `schemas/openapi.json`, the public API's whole OpenAPI document:

    python -m services.api.openapi [--check]

The document is the one the app serves at /schema/openapi.json, built here from default settings
and without a database (no request is served). tests/unit/test_openapi_pin.py fails when the
committed file drifts from it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ostinato.eventlog.store import EventStore
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from services.api.app import create_app

OPENAPI_FILE = Path(__file__).resolve().parents[2] / "schemas" / "openapi.json"
COMMAND = "python -m services.api.openapi"


def document() -> str:
    """The OpenAPI document as sorted, indented JSON with a trailing newline."""
    service = Service("api", Settings())  # not the environment's: the document must not vary
    app = create_app(service, EventStore(service.clock, service.settings.topics))
    return json.dumps(app.openapi_schema.to_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="write schemas/openapi.json")
    parser.add_argument("--check", action="store_true", help="fail if the file is not current")
    args = parser.parse_args(argv)
    text = document()
    if args.check:
        if not OPENAPI_FILE.exists() or OPENAPI_FILE.read_text(encoding="utf-8") != text:
            print(f"{OPENAPI_FILE} is out of date: run `{COMMAND}`", file=sys.stderr)
            return 1
        print(f"{OPENAPI_FILE} is current")
        return 0
    OPENAPI_FILE.write_text(text, encoding="utf-8")
    print(f"wrote {OPENAPI_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
