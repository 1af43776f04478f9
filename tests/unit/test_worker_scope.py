"""Pieces of shared workers that need no server: wake-ups of shared long polls, the registry
TTL setting, who may act as a worker, and that every named-SQL file is PREPAREd by the
integration test (it reads `queries.REGISTRY`)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from ostinato.db.queries import REGISTRY, sql_files_under
from ostinato.domain.errors import Forbidden
from ostinato.domain.roles import ADMIN, OPERATOR, Principal
from ostinato.runtime.settings import load_settings
from ostinato.wire.worker import MAX_CLAIM_WAIT_SECONDS
from services.worker_gateway.app import worker_scope
from services.worker_gateway.wakeups import ReadySignals

LIBS = Path(__file__).resolve().parents[2] / "libs"


async def test_a_shared_long_poll_is_woken_by_any_tenant_a_tenant_poll_only_by_its_own() -> None:
    signals = ReadySignals()
    a, b = uuid.uuid4(), uuid.uuid4()
    shared = asyncio.create_task(signals.wait(None, 5))
    mine = asyncio.create_task(signals.wait(b, 0.2))
    await asyncio.sleep(0)  # both registered
    signals.notify(a)
    assert await shared is True
    assert await mine is False  # another tenant's work does not wake b's worker


def test_worker_scope_is_the_keys_tenant_or_every_tenant_for_the_admin() -> None:
    tenant = uuid.uuid4()
    assert worker_scope(Principal(tenant, OPERATOR, "acme")) == tenant
    assert worker_scope(Principal(None, ADMIN, "admin")) is None
    with pytest.raises(Forbidden):
        worker_scope(Principal(None, "viewer", "nobody"))


def test_the_worker_ttl_outlasts_the_longest_claim_wait() -> None:
    assert load_settings({}).worker_ttl_seconds > MAX_CLAIM_WAIT_SECONDS
    assert load_settings({"OSTINATO_WORKER_TTL_SECONDS": "90"}).worker_ttl_seconds == 90
    with pytest.raises(SystemExit, match="OSTINATO_WORKER_TTL_SECONDS"):
        load_settings({"OSTINATO_WORKER_TTL_SECONDS": str(MAX_CLAIM_WAIT_SECONDS)})


def test_every_named_sql_file_of_the_library_is_registered_for_the_prepare_test() -> None:
    on_disk = set(sql_files_under(LIBS, "ostinato"))
    assert on_disk, "no named SQL found under libs/"
    assert on_disk - set(REGISTRY) == set(), "add these to ostinato.db.queries.REGISTRY"
