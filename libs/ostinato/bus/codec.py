"""The message envelope carried on every topic: the logged event plus its coordinates."""

from __future__ import annotations

import uuid
from datetime import datetime

import msgspec

from ostinato.domain.events import AnyEvent


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    event_id: uuid.UUID
    stream_id: uuid.UUID
    version: int
    tenant_id: uuid.UUID
    occurred_at: datetime
    actor: str
    epoch: int | None = None
    traceparent: str | None = None
    event: AnyEvent


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Envelope)

HEADER_EVENT_ID = "ostinato-event-id"
HEADER_TYPE = "ostinato-type"
HEADER_TENANT = "ostinato-tenant"


def encode(envelope: Envelope) -> bytes:
    return _encoder.encode(envelope)


def decode(value: bytes) -> Envelope:
    return _decoder.decode(value)
