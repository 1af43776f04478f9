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

The reads here answer as things stand; the api's routes wait for news (a value published, an
answer recorded, the run's end) on the run-end listener (`ostinato.eventlog.ended.wakes`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

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

_json = msgspec.json.Encoder()


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


async def state(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID, *,
                name: str | None = None) -> tuple[str, list[step_store.StateRow]]:
    """(the run's lifecycle state, the latest published values: of `name` alone if given)."""
    if name is not None and (problem := wf.bad_state_name(name)) is not None:
        raise InvalidInput(f"a state name: {problem}",
                           errors=[{"field": "name", "message": "invalid state name"}])
    run = await run_store.by_id(conn, tenant_id, run_id)
    if run is None:
        raise NotFound(f"no run {run_id}")
    return run.state, await step_store.state(conn, tenant_id, run_id, name)
