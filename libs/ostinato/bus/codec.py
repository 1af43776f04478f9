"""The message envelope carried on every topic: the logged event plus its coordinates."""

from __future__ import annotations

import uuid
from datetime import datetime

import msgspec

from ostinato.domain.events import AnyEvent, decode_event


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    """A wake-up: the last of an append's events for one tenant on one topic (`event`), and
    how many of that append's events on the topic for the tenant it stands for (`coalesced`).
    Consumers read what to do from PostgreSQL, so one message per (append, topic, tenant)
    wakes them as well as one per event did, for a hundredth of the messages."""

    event_id: uuid.UUID
    stream_id: uuid.UUID
    version: int
    tenant_id: uuid.UUID
    occurred_at: datetime
    actor: str
    epoch: int | None = None
    traceparent: str | None = None
    event: AnyEvent
    coalesced: int = 1


class _Opaque(msgspec.Struct, frozen=True, kw_only=True):
    """An envelope read with its event left raw: for an event type this release lacks."""

    event_id: uuid.UUID
    stream_id: uuid.UUID
    version: int
    tenant_id: uuid.UUID
    occurred_at: datetime
    actor: str
    epoch: int | None = None
    traceparent: str | None = None
    event: msgspec.Raw
    coalesced: int = 1


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Envelope)
_opaque = msgspec.json.Decoder(_Opaque)

HEADER_EVENT_ID = "ostinato-event-id"
HEADER_TYPE = "ostinato-type"
HEADER_TENANT = "ostinato-tenant"


def encode(envelope: Envelope) -> bytes:
    return _encoder.encode(envelope)


def decode(value: bytes) -> Envelope:
    """The envelope; one carrying an event of a type this release does not know (a newer
    release published it) holds it as `UnknownEvent`: still a wake-up, never dropped."""
    try:
        return _decoder.decode(value)
    except msgspec.ValidationError:
        raw = _opaque.decode(value)
        return Envelope(**{f: getattr(raw, f) for f in raw.__struct_fields__ if f != "event"},
                        event=decode_event(raw.event))  # type: ignore[arg-type]
