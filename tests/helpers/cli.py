"""The `ostinato` command line as a subprocess, against an API served by the test."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

from ostinato.client import AsyncClient
from tests.helpers.api import ADMIN

ROOT = Path(__file__).resolve().parents[2]


async def new_key(api_url: str) -> str:
    async with AsyncClient(api_url, ADMIN) as admin:
        return (await admin.tenants.create(f"t-{uuid.uuid4().hex[:8]}")).api_key


async def cli(home: Path, *args: str, env: dict[str, str] | None = None,
              stdin: str = "") -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m ostinato ARGS`."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("OSTINATO_API", "OSTINATO_PROFILE", "OSTINATO_CONFIG",
                                 "XDG_CONFIG"))}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ostinato", *args, cwd=ROOT,
        env={**base, "HOME": str(home), "NO_COLOR": "1", **(env or {})},
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 120)  # a hang guard
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
