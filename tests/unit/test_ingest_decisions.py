"""The Kafka ingest's pure decisions (services/api/ingest.py, docs/KAFKA.md): which error while
handling one message rejects it and which retries it, what a rejection holds, how long a
partition waits; and the one check, shared by HTTP and Kafka, that finds NUL in a job's text
fields before any SQL."""

from __future__ import annotations

import base64
import hashlib
import uuid

import asyncpg
import msgspec
import pytest
from aiokafka import ConsumerRecord
from aiokafka.errors import KafkaConnectionError, RequestTimedOutError

from ostinato.bus.consumer import RETRY_MOST_SECONDS, backoff
from ostinato.domain.errors import IdempotencyConflict, UnstorableText
from ostinato.domain.text import fields_holding_nul
from ostinato.jobs.submit import unstorable_fields
from ostinato.policy.retry import RetrySpec
from ostinato.schedules import ScheduleSpec
from ostinato.wire.api import JobRequest
from services.api.ingest import (
    REJECTION_MAX_BYTES,
    Rejected,
    decode_request,
    problem_of,
    rejection,
)


def record(value: bytes | None, offset: int = 7) -> ConsumerRecord:
    return ConsumerRecord(topic="ostinato.submit.x", partition=0, offset=offset, timestamp=0,
                          timestamp_type=0, key=None, value=value, checksum=None,
                          serialized_key_size=-1, serialized_value_size=0, headers=())


def test_fields_holding_nul_are_named_by_their_path() -> None:
    doc = {"name": "ok", "schedule": {"cron": "0 9\x00 * * *"}, "retry": {
        "retryable_types": ["Fine", "Bad\x00"]}, "tags": {"k\x00": "v"}}
    assert fields_holding_nul(doc) == ["schedule.cron", "retry.retryable_types[1]", "tags.k\x00"]
    assert fields_holding_nul({"a": ["x", 1, None, {"b": "y"}]}) == []
    assert fields_holding_nul("\x00") == ["body"]


def test_a_job_request_with_nul_outside_its_payload_names_each_field() -> None:
    request = JobRequest(name="n", idempotency_key="a\x00b", concurrency_key="c\x00",
                         schedule=ScheduleSpec(cron="0 9 * * *", timezone="Europe/Ber\x00lin"),
                         retry=RetrySpec(permanent_types=["X\x00"]))
    assert unstorable_fields(request) == [
        "schedule.timezone", "idempotency_key", "concurrency_key", "retry.permanent_types[0]"]


def test_a_payload_may_hold_nul_it_is_kept_as_bytes() -> None:
    assert unstorable_fields(JobRequest(name="n", payload={"s": "a\x00b", "k\x00": 1})) == []


def test_unstorable_text_is_a_400_naming_the_fields() -> None:
    exc = UnstorableText(["idempotency_key", "jobs[2].concurrency_key"])
    assert (exc.status, exc.problem_type.rsplit("/", 1)[1]) == (400, "bad-request")
    assert [e["field"] for e in exc.extra["errors"]] == ["idempotency_key",
                                                          "jobs[2].concurrency_key"]
    assert "idempotency_key" in exc.detail and "U+0000" in exc.detail


def test_the_issues_nul_message_decodes_and_is_refused_by_the_shared_check() -> None:
    request = decode_request(b'{"name":"kafka-nul","task":"t3.ok",'
                             b'"idempotency_key":"a\\u0000b"}')
    assert unstorable_fields(request) == ["idempotency_key"]


@pytest.mark.parametrize("value", [b'"\\ud800"', b'{"name":"x\\udc00"}', b"\xed\xa0\x80",
                                   b"\xff", b'{"name":"x","payload":' + b"[" * 100_000,
                                   b"", None])
def test_lone_surrogates_bad_bytes_and_deep_nesting_are_rejected_400(value: bytes | None) -> None:
    with pytest.raises(Rejected) as caught:
        decode_request(value)
    assert caught.value.problem["status"] == 400


def test_only_an_outage_is_retried_everything_else_is_the_messages_own_rejection() -> None:
    retried = [KafkaConnectionError(), RequestTimedOutError(), ConnectionResetError(),
               TimeoutError(), asyncpg.InterfaceError("connection is closed"),
               asyncpg.QueryCanceledError("statement timeout"),
               asyncpg.SerializationError("could not serialize"),
               asyncpg.LockNotAvailableError("lock timeout"),
               asyncpg.UniqueViolationError("duplicate key"),
               asyncpg.CannotConnectNowError("starting up"),
               asyncpg.ReadOnlySQLTransactionError("read-only after a failover")]
    assert [problem_of(e) for e in retried] == [None] * len(retried)

    assert problem_of(Rejected({"status": 422, "detail": "d"})) == {"status": 422, "detail": "d"}
    conflict = problem_of(IdempotencyConflict("idempotency_key 'k' already came"))
    assert conflict is not None and conflict["status"] == 409
    assert conflict["type"].endswith("/idempotency-conflict")
    nul = problem_of(UnstorableText(["idempotency_key"]))
    assert nul is not None and nul["status"] == 400
    assert nul["errors"] == [{"field": "idempotency_key",
                              "message": "holds U+0000 (NUL), which cannot be stored"}]
    stored = problem_of(asyncpg.CharacterNotInRepertoireError("invalid byte sequence"))
    assert stored is not None and stored["status"] == 400
    # An error no check foresaw is never retried for ever: the API's 500, as a rejection.
    for unforeseen in (ValueError("x"), KeyError("y"), UnicodeEncodeError("utf-8", "", 0, 1, "z"),
                       asyncpg.NumericValueOutOfRangeError("out of range")):
        problem = problem_of(unforeseen)
        assert problem is not None and problem["status"] == 500, unforeseen
        assert problem["type"].endswith("/internal")


def test_a_rejection_repeats_the_message_as_text_or_base64() -> None:
    body = msgspec.json.decode(rejection("ostinato.submit.x", record(b'{"a":"\\u0000"}'),
                                         {"status": 400}))
    assert body == {"problem": {"status": 400}, "topic": "ostinato.submit.x", "partition": 0,
                    "offset": 7, "message": '{"a":"\\u0000"}'}
    raw = b"\xff\x00\xfe"
    body = msgspec.json.decode(rejection("t", record(raw), {"status": 400}))
    assert body["message"] == {"base64": base64.b64encode(raw).decode()}
    assert msgspec.json.decode(rejection("t", record(None), {"status": 400}))["message"] == ""


def test_a_rejection_of_a_long_message_gives_its_size_and_digest_instead() -> None:
    value = b'"' + b"\x01" * REJECTION_MAX_BYTES + b'"'  # each byte escaped 6 times longer
    encoded = rejection("t", record(value), {"status": 413})
    assert len(encoded) <= REJECTION_MAX_BYTES
    assert msgspec.json.decode(encoded)["message"] == {
        "omitted": "too long to repeat", "bytes": len(value),
        "sha256": hashlib.sha256(value).hexdigest()}


def test_a_partitions_backoff_grows_and_is_capped() -> None:
    waits = [backoff(n) for n in range(1, 40)]
    assert waits == sorted(waits) and waits[0] > 0 and waits[-1] == RETRY_MOST_SECONDS


def test_the_tenant_is_never_the_messages() -> None:
    # a message naming a tenant is only a body; rejection() repeats it, nothing reads it
    body = rejection("t", record(msgspec.json.encode({"tenant_id": str(uuid.uuid4())})),
                     {"status": 422})
    assert b"tenant_id" in body
