"""Handler versions without servers: declared ones are checked, derived ones follow the code
(the same code gives the same version, a change gives another); the worker's claim declares
them; the dispatcher holds a pinned run whose version no live worker serves."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from ostinato.sdk import Worker, WorkflowContext, task, workflow
from ostinato.sdk.tasks import code_version, registry
from ostinato.stores.runs import WaitingRun
from services.dispatcher.snapshot import unserved


def test_a_declared_version_is_kept_as_text_and_bad_ones_are_refused() -> None:
    assert task("t", version=3)(lambda p: p).served_version == "3"
    assert task("t", version="2024.1-rc+b")(lambda p: p).served_version == "2024.1-rc+b"
    for bad in ("", "has space", "-leading", "x" * 65):
        with pytest.raises(ValueError, match="version"):
            task("t", version=bad)
    with pytest.raises(TypeError):
        task("t", version=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        task("t", version=True)


def _flow(body: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(body, "<flow>", "exec"), namespace)
    return namespace["flow"]


def test_a_derived_version_follows_the_code() -> None:
    one = "async def flow(ctx, p):\n    return await ctx.step('a', print)\n"
    other = "async def flow(ctx, p):\n    return await ctx.step('b', print)\n"
    # no source for exec'd code: the bytecode decides
    assert code_version(_flow(one)) == code_version(_flow(one))
    assert code_version(_flow(one)) != code_version(_flow(other))

    def handler(payload: None) -> int:
        return 1

    assert code_version(handler) == code_version(handler)
    assert code_version(handler).startswith("c") and len(code_version(handler)) == 13


def test_a_workflow_version_is_derived_from_its_own_function_not_the_wrapper() -> None:
    async def a(ctx: WorkflowContext, payload: None) -> int:
        return 1

    async def b(ctx: WorkflowContext, payload: None) -> int:
        return 2

    wa, wb = workflow("w")(a), workflow("w")(b)
    assert wa.workflow and wa.served_version == code_version(a)
    assert wa.served_version != wb.served_version
    assert workflow("w", version=7)(a).served_version == "7"


def test_the_claim_declares_every_version_and_the_workflows_that_pin() -> None:
    plain = task("mail.send", version=4)(lambda p: p)

    async def flow(ctx: WorkflowContext, payload: None) -> None:
        return None

    flows = workflow("billing", version=3)(flow)
    handlers = registry([plain, flows])
    assert {n: (h.version, h.workflow) for n, h in handlers.items()} == {
        "mail.send": ("4", False), "billing": ("3", True)}
    worker = Worker("http://127.0.0.1:1", "key", [plain, flows])
    assert worker._versions == {"billing": "3", "mail.send": "4"}
    assert worker._workflows == ["billing"]


def _waiting(pinned: bool, version: str | None, tenant: uuid.UUID,
             pool: str = "default") -> WaitingRun:
    return WaitingRun(id=uuid.uuid4(), tenant_id=tenant, pool=pool, priority="default",
                      task="billing", concurrency_key=None, resource=None,
                      updated_at=datetime(2026, 12, 2, tzinfo=UTC), pinned=pinned,
                      task_version=version)


def test_the_dispatcher_holds_a_pinned_run_only_when_no_live_worker_serves_its_version() -> None:
    tenant, other = uuid.uuid4(), uuid.uuid4()
    served = frozenset({(tenant, "default", "billing", "2"), (None, "long", "billing", "3")})
    assert unserved(_waiting(True, "2", tenant), served) is None  # the tenant's own worker
    assert unserved(_waiting(True, "3", other, "long"), served) is None  # a shared worker
    assert unserved(_waiting(True, "2", other), served) == \
        "no worker serves billing v2 in pool default"  # another tenant's worker does not count
    assert unserved(_waiting(True, "3", tenant), served) == \
        "no worker serves billing v3 in pool default"  # served in another pool only
    assert unserved(_waiting(False, "9", tenant), served) is None  # not pinned: any version
    assert unserved(_waiting(True, "9", tenant), None) is None  # nothing known: no check
