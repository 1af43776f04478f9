"""The worker protocol over HTTP (see `ostinato.wire.worker` for the wire types).

A worker authenticates with a tenant's worker key (or an operator's; it serves that tenant only,
and a worker key limited to pools claims from those only) or with the admin key: a shared
worker serving every tenant's runs in its pools (`worker_scope`). Every route is a `WORK`
action (`ostinato.domain.roles`): viewer and submitter keys are refused. Every route records the
worker's presence in the registry (`presence.py`), from which fair dispatch reads capacity.

A worker sends its key with every request, and a lone workflow makes one request per step, so
the gateway remembers the principals of keys it authenticated for `KNOWN_KEY_SECONDS`
(`KnownKeys`) rather than paying a pool checkout and a query per request (a fifth of a step's
time in the gateway). A key that failed is never remembered, so a key issued a moment ago works
at once; a revoked key (`ApiKeyRevoked`) is accepted by a gateway that remembered it for at most
`KNOWN_KEY_SECONDS` more (docs/SECURITY.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from typing import Any

import structlog
from litestar import Litestar, Request, Response, post
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.params import FromPath, JSONBody

from ostinato.clock import Clock
from ostinato.domain import roles
from ostinato.domain.errors import PROBLEM_BASE, Forbidden
from ostinato.domain.roles import ADMIN, Principal
from ostinato.runtime.auth import Caller, principal
from ostinato.runtime.contract import apply_contract
from ostinato.runtime.instants import check_instants, raise_pending
from ostinato.runtime.ops import BodyLimit, instrument_http, ops_route_handlers, tracing_middleware
from ostinato.runtime.problems import EXCEPTION_HANDLERS, problem
from ostinato.runtime.service import Service
from ostinato.wire import worker as p
from ostinato.wire.worker import TASKS_PATH, RegisterTasksRequest, RegisterTasksResponse
from services.worker_gateway import schemas
from services.worker_gateway.attempts import Attempts, Outcome
from services.worker_gateway.presence import WorkerPresence
from services.worker_gateway.reports import parse_run_id
from services.worker_gateway.wakeups import ReadySignals

FALLBACK_POLL_SECONDS = 1.0
KNOWN_KEY_SECONDS = 10.0
KNOWN_KEYS_MAX = 10_000
# A declared longer body is a 413 problem before the gateway reads it (`BodyLimit`); a chunked
# one is cut off there too. Litestar's own default, kept: a batch carries up to 4 MiB of log
# lines (`sdk/reporter.py`) plus its outputs.
MAX_BODY_BYTES = 10_000_000


class KnownKeys:
    """Principals of recently authenticated keys, by the SHA-256 of the Authorization header
    (the key itself is not kept), each for `ttl` seconds of the monotonic clock; the oldest go
    first when `size` are kept."""

    def __init__(self, clock: Clock, ttl: float = KNOWN_KEY_SECONDS,
                 size: int = KNOWN_KEYS_MAX) -> None:
        self._clock = clock
        self._ttl = ttl
        self._size = size
        self._known: dict[bytes, tuple[float, Principal]] = {}

    def get(self, header: str) -> Principal | None:
        digest = hashlib.sha256(header.encode()).digest()
        entry = self._known.get(digest)
        if entry is None:
            return None
        if self._clock.monotonic() >= entry[0]:
            del self._known[digest]
            return None
        return entry[1]

    def put(self, header: str, found: Principal) -> None:
        digest = hashlib.sha256(header.encode()).digest()
        self._known.pop(digest, None)
        while len(self._known) >= self._size:
            del self._known[next(iter(self._known))]
        self._known[digest] = (self._clock.monotonic() + self._ttl, found)


async def known_principal(request: Request) -> Principal:
    """`runtime.auth.principal`, remembered per key for `KNOWN_KEY_SECONDS` (module doc)."""
    header = request.headers.get("authorization", "")
    known: KnownKeys = request.app.state.known_keys
    found = known.get(header)
    if found is None:
        found = await principal(request)  # raises for a missing or unknown key
        known.put(header, found)
    else:
        if found.tenant_id is not None:
            structlog.contextvars.bind_contextvars(tenant_id=str(found.tenant_id))
        raise_pending(request)  # `principal` raised it on the other path
    return found


def _outcome(item: p.CompletionItem | p.FailureItem | p.ReleaseItem) -> Outcome:
    run_id = parse_run_id(item.run_id)
    match item:
        case p.CompletionItem():
            return Outcome(
                run_id,
                item.run_id,
                item.fencing_token,
                "complete",
                output=item.output,
                logs=item.logs,
            )
        case p.FailureItem():
            return Outcome(
                run_id, item.run_id, item.fencing_token, "fail", error=item.error, logs=item.logs
            )
        case _:
            return Outcome(run_id, item.run_id, item.fencing_token, "release")


def _attempts(request: Request) -> Attempts:
    return request.app.state.attempts


def _presence(request: Request) -> WorkerPresence:
    return request.app.state.presence


def worker_scope(caller: Principal) -> uuid.UUID | None:
    """The tenant a worker serves: its key's tenant, or None (every tenant) for the admin key."""
    if caller.tenant_id is not None:
        return caller.tenant_id
    if caller.role != ADMIN:
        raise Forbidden("a worker needs a tenant's API key or the admin key")
    return None


async def _header_worker(request: Request, scope: uuid.UUID | None) -> str:
    """Single-run routes name the worker in a header; a named one is seen alive."""
    worker = request.headers.get("x-ostinato-worker")
    if worker:
        await _presence(request).reported(scope, worker)
    return worker or "unknown"


@post(p.CLAIM_PATH, status_code=200, tags=["worker"])
async def claim(
    request: Request, data: JSONBody[p.ClaimRequest], caller: Caller
) -> p.ClaimResponse:
    """Lease up to `max_runs` queued runs of this tenant (of every tenant with the admin key),
    waiting up to `wait_seconds`."""
    scope = worker_scope(caller)
    state = request.app.state
    clock = state.clock
    deadline = clock.monotonic() + data.wait_seconds
    if caller.pools and not set(data.pools) <= set(caller.pools):
        outside = ", ".join(sorted(set(data.pools) - set(caller.pools)))
        raise Forbidden(f"this worker key serves the pools {', '.join(caller.pools)} only, "
                        f"not {outside}")
    # Before the wait: the registry TTL is longer than any wait, so this keeps the worker live.
    await _presence(request).claimed(scope, data)
    # The body is read: the next ASGI message is the client hanging up. A worker that went away
    # (killed, or stopping and abandoning its poll) must not be leased anything.
    gone = asyncio.ensure_future(request.receive())
    # A gateway told to stop answers its long polls at once (empty): the drain (ops.Drain)
    # then sends the workers' next claims elsewhere instead of holding them to the end.
    stopping = asyncio.ensure_future(state.stopping.wait())
    try:
        while not gone.done():
            runs = await _attempts(request).claim(scope, data)
            remaining = deadline - clock.monotonic()
            if runs or remaining <= 0 or state.stopping.is_set():
                return p.ClaimResponse(runs=runs)
            ready = asyncio.ensure_future(
                state.signals.wait(scope, min(remaining, FALLBACK_POLL_SECONDS)))
            await asyncio.wait([ready, gone, stopping], return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
        return p.ClaimResponse(runs=[])
    finally:
        gone.cancel()
        stopping.cancel()


@post(p.BATCH_PATH, status_code=200, tags=["worker"])
async def batch(
    request: Request, data: JSONBody[p.BatchRequest], caller: Caller
) -> p.BatchResponse:
    """Heartbeats and outcomes of many runs in one request; one result per item."""
    scope = worker_scope(caller)
    await _presence(request).reported(scope, data.worker_id)
    attempts = _attempts(request)
    results = await attempts.heartbeat(scope, data.worker_id, data.heartbeats)
    outcomes = [_outcome(i) for i in [*data.completions, *data.failures, *data.releases]]
    results += await attempts.record(scope, data.worker_id, outcomes)
    results += await attempts.steps(scope, data.worker_id, data.steps)
    await attempts.steps_started(scope, data.started)  # after the steps: a report ends one
    return p.BatchResponse(results=results)


def _single(result: p.BatchItemResult, request: Request, body: Any) -> Response[Any]:
    if result.status == 200:
        return Response(body, status_code=200)
    if result.status == 404:
        return problem(404, PROBLEM_BASE + "not-found", "Not found", result.detail or "", request)
    return problem(
        409,
        PROBLEM_BASE + "stale-fencing-token",
        "Stale fencing token",
        result.detail or "",
        request,
    )


@post("/v1/worker/runs/{run_id:str}/heartbeat", status_code=200, tags=["worker"])
async def heartbeat(
    request: Request, run_id: FromPath[str], data: JSONBody[p.HeartbeatRequest], caller: Caller
) -> Response[p.HeartbeatResponse]:
    scope = worker_scope(caller)
    worker = await _header_worker(request, scope)
    [result] = await _attempts(request).heartbeat(
        scope, worker, [p.HeartbeatItem(run_id=run_id, fencing_token=data.fencing_token)]
    )
    body = None
    if result.status == 200:
        assert result.lease_expires_at is not None
        body = p.HeartbeatResponse(
            lease_expires_at=result.lease_expires_at, cancel_requested=result.cancel_requested
        )
    return _single(result, request, body)


@post("/v1/worker/runs/{run_id:str}/complete", status_code=200, tags=["worker"])
async def complete(
    request: Request, run_id: FromPath[str], data: JSONBody[p.CompleteRequest], caller: Caller
) -> Response[p.OutcomeResponse]:
    scope = worker_scope(caller)
    worker = await _header_worker(request, scope)
    item = p.CompletionItem(run_id=run_id, fencing_token=data.fencing_token, output=data.output)
    [result] = await _attempts(request).record(scope, worker, [_outcome(item)])
    return _single(result, request, p.OutcomeResponse(state="succeeded"))


@post("/v1/worker/runs/{run_id:str}/fail", status_code=200, tags=["worker"])
async def fail(
    request: Request, run_id: FromPath[str], data: JSONBody[p.FailRequest], caller: Caller
) -> Response[p.OutcomeResponse]:
    scope = worker_scope(caller)
    worker = await _header_worker(request, scope)
    item = p.FailureItem(run_id=run_id, fencing_token=data.fencing_token, error=data.error)
    [result] = await _attempts(request).record(scope, worker, [_outcome(item)])
    return _single(result, request, p.OutcomeResponse(state="failed"))


@post("/v1/worker/runs/{run_id:str}/release", status_code=200, tags=["worker"])
async def release(
    request: Request, run_id: FromPath[str], data: JSONBody[p.ReleaseRequest], caller: Caller
) -> Response[p.OutcomeResponse]:
    """Give an unfinished run back: it is queued again at once, no attempt is used."""
    scope = worker_scope(caller)
    worker = await _header_worker(request, scope)
    item = p.ReleaseItem(run_id=run_id, fencing_token=data.fencing_token)
    [result] = await _attempts(request).record(scope, worker, [_outcome(item)])
    return _single(result, request, p.OutcomeResponse(state="retry_scheduled"))


@post("/v1/worker/runs/{run_id:str}/steps", status_code=200, tags=["worker"])
async def recorded_steps(
    request: Request, run_id: FromPath[str], data: JSONBody[p.StepsRequest], caller: Caller
) -> Response[p.StepsResponse]:
    """A page of the workflow steps the run has recorded, for the attempt holding its lease (a
    resuming workflow replays them)."""
    scope = worker_scope(caller)
    await _header_worker(request, scope)
    answer = await _attempts(request).recorded_steps(scope, run_id, data)
    if isinstance(answer, int):
        detail = ("no such run for this tenant" if answer == 404 else
                  "stale fencing token: this attempt no longer holds the run's lease")
        return _single(p.BatchItemResult(run_id=run_id, kind="step", status=answer,
                                         detail=detail), request, None)
    return Response(answer, status_code=200)


@post(p.GOODBYE_PATH, status_code=200, tags=["worker"])
async def goodbye(
    request: Request, data: JSONBody[p.GoodbyeRequest], caller: Caller
) -> p.GoodbyeResponse:
    """A worker stopping gracefully: its declared slots leave the pool capacity at once, and
    runs still leased in its name (a claim its stop cut short) go back to the queue."""
    scope = worker_scope(caller)
    forgotten = await _presence(request).goodbye(scope, data.worker_id)
    released = await _attempts(request).release_held(scope, data.worker_id)
    return p.GoodbyeResponse(forgotten=forgotten, released=released)


@post(TASKS_PATH, status_code=200, tags=["worker"])
async def register_tasks(
    request: Request, data: JSONBody[RegisterTasksRequest], caller: Caller
) -> Response[RegisterTasksResponse]:
    """Register the payload schemas of the worker's tasks (before its first claim): 409 when a
    (task, payload_version) is registered already with another schema (`schemas.py`)."""
    return await schemas.register_tasks(request, worker_scope(caller), data)


ROUTES = [claim, batch, heartbeat, complete, fail, release, recorded_steps, goodbye,
          register_tasks]


def create_app(service: Service, attempts: Attempts, signals: ReadySignals,
               presence: WorkerPresence | None = None) -> Litestar:
    app = Litestar(
        route_handlers=[*ROUTES, *ops_route_handlers(lambda: service.readiness(kafka=True))],
        dependencies={"caller": Provide(known_principal)},
        opt={"action": roles.WORK},
        exception_handlers=EXCEPTION_HANDLERS,
        before_request=check_instants,
        middleware=tracing_middleware(),
        openapi_config=OpenAPIConfig(
            title="Ostinato worker protocol", version="0.1.0", path="/schema",
            description=f"Claims, heartbeats and outcomes of runs. Errors are RFC 9457 problem "
                        f"details; a body over {MAX_BODY_BYTES:,} bytes is a 413 before it is "
                        f"read.",
        ),
        logging_config=None,  # logging is configured once, by telemetry.logging
        state=State(
            {
                "pool": service.pool,
                "attempts": attempts,
                "signals": signals,
                "presence": presence or WorkerPresence(service.pool, service.clock),
                "clock": service.clock,
                "known_keys": KnownKeys(service.clock),
                "settings": service.settings,
                "stopping": service.stopping,
            }
        ),
        request_max_body_size=MAX_BODY_BYTES,
    )
    apply_contract(instrument_http(app), rate_limited=False)  # no per-key rate here
    app.asgi_handler = BodyLimit(app.asgi_handler, MAX_BODY_BYTES)
    return app
