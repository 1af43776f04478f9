"""Updates to a running workflow (`POST /v1/runs/{id}/updates`) and what it published
(`GET /v1/runs/{id}/state`): the model is the step model's (`ostinato.domain.workflow`,
published state and updates).

An update travels as a signal on the engine's reserved channel `UPDATE_SIGNAL`, so it is kept
in the run's stream (`SignalReceived`), delivered to the workflow's `ctx.next_update` wait
(`SignalDelivered`: taken once, replayed to later attempts), and wakes a run suspended in that
wait, exactly as a signal does (`ostinato.runs.signals`). Its id derives from the caller's
idempotency key (a key is made when none is given), so the same key names the same update and
returns the same answer. The workflow's answer is a recorded position (`reply:<update id>`).
A final run takes no updates (409); a payload over `MAX_STATE_BYTES` is a 413.

Waiting (`wait` seconds) is a bounded poll inside the server for now (every `POLL_SECONDS`,
never past `MAX_WAIT_SECONDS`), holding the request's connection meanwhile.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
import msgspec

from ostinato.domain import workflow as wf
from ostinato.domain.errors import InvalidInput, InvalidState, NotFound, PayloadTooLarge
from ostinato.domain.ids import new_id
from ostinato.domain.states import FINAL, RunState
from ostinato.eventlog.store import EventStore
from ostinato.runs.signals import send_signal, signal_id_for
from ostinato.stores import runs as run_store
from ostinato.stores import signals
from ostinato.stores import steps as step_store

MAX_WAIT_SECONDS = 60.0
POLL_SECONDS = 0.2
_json = msgspec.json.Encoder()
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class UpdateSent:
    update_id: uuid.UUID
    created: bool  # False: this idempotency key named an update already sent


@dataclass(frozen=True, slots=True)
class UpdateOutcome:
    update_id: uuid.UUID
    name: str
    state: wf.UpdateState
    taken: bool  # a `next_update` wait of the workflow took it
    answer: dict[str, Any] | None  # the recorded answer: {"ok", "output"} or {"ok", "error"}


def update_id_for(run_id: uuid.UUID, idempotency_key: str) -> uuid.UUID:
    """The update a key names on a run (the id of the signal that carries it)."""
    return signal_id_for(run_id, wf.UPDATE_SIGNAL, idempotency_key)


async def send_update(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                      run_id: uuid.UUID, name: str, payload: Any, actor: str,
                      idempotency_key: str | None) -> UpdateSent:
    if (problem := wf.bad_state_name(name)) is not None:
        raise InvalidInput(f"an update name: {problem}",
                           errors=[{"field": "name", "message": "invalid update name"}])
    try:
        size = len(_json.encode(payload))
    except (TypeError, msgspec.EncodeError) as exc:
        raise InvalidInput(f"the payload is not JSON: {exc}") from exc
    if (problem := wf.too_large(size, "the update's payload")) is not None:
        raise PayloadTooLarge(problem)
    key = idempotency_key or str(new_id())
    update_id = update_id_for(run_id, key)
    envelope = {"id": str(update_id), "name": name, "payload": payload}
    try:
        sent = await send_signal(conn, store, tenant_id=tenant_id, run_id=run_id,
                                 name=wf.UPDATE_SIGNAL, payload=envelope, actor=actor,
                                 idempotency_key=key, max_payload_bytes=2 * wf.MAX_STATE_BYTES,
                                 engine=True)
    except InvalidState as exc:
        raise InvalidState(f"run {run_id} is final: a finished run takes no updates") from exc
    assert sent.signal_id == update_id
    return UpdateSent(update_id, sent.created)


async def outcome(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID,
                  update_id: uuid.UUID) -> UpdateOutcome:
    run = await run_store.by_id(conn, tenant_id, run_id)
    if run is None:
        raise NotFound(f"no run {run_id}")
    sent = await signals.by_id(conn, tenant_id, run_id, update_id)
    if sent is None or sent.name != wf.UPDATE_SIGNAL:
        raise NotFound(f"no update {update_id} on run {run_id}")
    answer = await step_store.reply(conn, tenant_id, run_id, wf.reply_step(update_id))
    final = RunState(run.state) in FINAL
    envelope = sent.payload if isinstance(sent.payload, dict) else {}
    return UpdateOutcome(update_id, str(envelope.get("name", "")),
                         wf.update_state(answer, final), sent.delivered_seq is not None,
                         answer if isinstance(answer, dict) else None)


async def await_outcome(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID,
                        update_id: uuid.UUID, wait: float) -> UpdateOutcome:
    """The update's outcome once it is no longer pending, or as it stands after `wait`."""
    return await _poll(lambda: outcome(conn, tenant_id, run_id, update_id),
                       lambda o: o.state is not wf.UpdateState.PENDING, wait)


async def state(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID, *,
                name: str | None = None,
                wait: float = 0.0) -> tuple[str, list[step_store.StateRow]]:
    """(the run's lifecycle state, the latest published values); with `name` and `wait`, waits
    until that name is published or the run is final, or `wait` seconds passed."""
    if name is not None and (problem := wf.bad_state_name(name)) is not None:
        raise InvalidInput(f"a state name: {problem}",
                           errors=[{"field": "name", "message": "invalid state name"}])

    async def read() -> tuple[str, list[step_store.StateRow]]:
        run = await run_store.by_id(conn, tenant_id, run_id)
        if run is None:
            raise NotFound(f"no run {run_id}")
        return run.state, await step_store.state(conn, tenant_id, run_id, name)

    return await _poll(read, lambda r: name is None or bool(r[1])
                       or RunState(r[0]) in FINAL, wait)


async def _poll(read: Callable[[], Awaitable[T]], done: Callable[[T], bool], wait: float) -> T:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + min(max(wait, 0.0), MAX_WAIT_SECONDS)
    while True:
        found = await read()
        if done(found) or loop.time() >= give_up:
            return found
        await asyncio.sleep(min(POLL_SECONDS, max(0.0, give_up - loop.time())))
