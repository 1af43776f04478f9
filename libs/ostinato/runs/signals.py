"""Sending a signal to a run (`POST /v1/runs/{id}/signals/{name}`): kept in the run's stream,
delivered to the workflow's wait of that name (`ostinato.sdk.workflow.wait_for_signal`).

A run suspended waiting for this signal is delivered it at once and woken, in the same
transaction; any other non-final run keeps it (`run_signals`) for its next wait of that name,
oldest first. A finished run takes no signals (409). An idempotency key names the signal: the
same key again with the same payload returns the first send's answer and records nothing; with
another payload it is a 409 `idempotency-conflict` (as a job's key), never a silent drop of the
second payload. A payload over `INLINE_OUTPUT_BYTES` (`ostinato.domain.workflow`) is kept in
the blob store and referenced from the events.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec

from ostinato.domain import events as ev
from ostinato.domain import workflow as wf
from ostinato.domain.errors import (
    IdempotencyConflict,
    InvalidInput,
    InvalidState,
    PayloadTooLarge,
)
from ostinato.domain.ids import new_id
from ostinato.domain.states import FINAL, RunState
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore, get_blobs, put_blobs, stage_blobs
from ostinato.runs.commands import lock_run
from ostinato.stores import signals

MAX_SIGNAL_NAME_CHARS = 256
MAX_SIGNAL_REASON_CHARS = 1000
_json = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class SignalSent:
    signal_id: uuid.UUID
    delivered: bool  # taken by a wait (now, or by the first send of this key)
    created: bool  # False: a repeat of an idempotency key already used


def same_payload(first: Any, again: Any) -> bool:
    """Whether two decoded JSON payloads are one: equal canonical JSON (keys sorted at every
    level), what a signal's idempotency key stands for."""
    return msgspec.json.encode(first, order="sorted") == msgspec.json.encode(again,
                                                                            order="sorted")


def signal_id_for(run_id: uuid.UUID, name: str, idempotency_key: str | None) -> uuid.UUID:
    if idempotency_key is None:
        return new_id()
    return uuid.uuid5(run_id, f"signal/{name}/{idempotency_key}")


async def send_signal(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                      run_id: uuid.UUID, name: str, payload: Any, actor: str,
                      idempotency_key: str | None, max_payload_bytes: int,
                      reason: str | None = None, engine: bool = False) -> SignalSent:
    """`reason`: why the sender sent it, recorded on `SignalReceived` (an operator delivering
    a signal on the run's behalf: docs/WORKFLOWS.md, "Operator interventions"). Names starting
    with "$" are the engine's own channels (`engine`: updates, `ostinato.runs.updates`)."""
    if name.startswith("$") and not engine:
        raise InvalidInput('signal names starting with "$" are reserved (updates travel on '
                           f"{wf.UPDATE_SIGNAL!r}: POST /v1/runs/{{id}}/updates)",
                           errors=[{"field": "name", "message": "reserved signal name"}])
    if reason is not None and not 0 < len(reason) <= MAX_SIGNAL_REASON_CHARS:
        raise InvalidInput(f"a reason has 1 to {MAX_SIGNAL_REASON_CHARS} characters",
                           errors=[{"field": "reason", "message": "invalid reason"}])
    if not name or len(name) > MAX_SIGNAL_NAME_CHARS:
        raise InvalidInput(f"a signal name has 1 to {MAX_SIGNAL_NAME_CHARS} characters",
                           errors=[{"field": "name", "message": "invalid signal name"}])
    body = _json.encode(payload)
    size = len(body)
    if size > max_payload_bytes:
        raise PayloadTooLarge(f"signal payload is {size} bytes; the limit is "
                              f"{max_payload_bytes}")
    signal_id = signal_id_for(run_id, name, idempotency_key)
    # a large payload is put before the run's row is locked (a stalled store holds no lock)
    staged = await stage_blobs(conn, [(tenant_id, body)] if size > wf.INLINE_OUTPUT_BYTES
                               else [])
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        earlier = await signals.by_id(conn, tenant_id, run_id, signal_id)
        if earlier is not None:
            first = earlier.payload
            if earlier.payload_ref is not None:
                first = (await get_blobs(conn, [earlier.payload_ref], tenant_id)).get(
                    earlier.payload_ref)
            if not same_payload(first, payload):
                raise IdempotencyConflict(
                    f"Idempotency-Key {idempotency_key!r} already sent signal {name!r} with "
                    "another payload: a key names one signal; use a new key for another")
            return SignalSent(signal_id, earlier.delivered_seq is not None, created=False)
        state = RunState(run.state)
        if state in FINAL:
            raise InvalidState(f"run {run_id} is already {state}: a finished run takes no "
                               "signals")
        head = StreamHead.of(run)
        ref = None
        if size > wf.INLINE_OUTPUT_BYTES:
            ref, payload = new_id(), None
            await put_blobs(conn, [(ref, tenant_id, body)], "step", staged=staged)
        events = [head.next(ev.SignalReceived(signal_id=signal_id, name=name, payload=payload,
                                              by=actor, payload_ref=ref, reason=reason),
                            actor,
                            traceparent=run.traceparent)]
        waiting = wf.waits_on(state=state, wait_reason=run.wait_reason,
                              waited=run.wait_signal, reason="signal", what=name)
        delivered, woken = wf.ended_wait(waiting, run.paused)
        if delivered:
            assert run.wait_seq is not None and run.wait_name is not None
            events.append(head.next(ev.SignalDelivered(seq=run.wait_seq, name=run.wait_name,
                                                       signal_id=signal_id, payload=payload,
                                                       payload_ref=ref), actor,
                                    traceparent=run.traceparent))
            if woken:  # a paused run is woken by its resume (ostinato.runs.pausing)
                events.append(head.next(ev.RunWoken(cause="signal"), actor,
                                        traceparent=run.traceparent))
        await store.append(conn, events)
    return SignalSent(signal_id, delivered=waiting, created=True)
