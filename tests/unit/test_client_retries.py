"""When the client sends a call again (issue 42): after a 503 or a connection lost before an
answer, only a call safe to repeat (a read, or a create carrying a key the API dedupes by),
bounded by `retries`, waiting at least `Retry-After`. The policy is pure; the loop is checked
over httpx's MockTransport standing in for the API (the real one: test_db_blip.py)."""

from __future__ import annotations

import httpx
import msgspec
import pytest

from ostinato.client import ApiError, Client
from ostinato.client import calls as c
from ostinato.client import transport as t


def test_the_wait_honours_retry_after_and_otherwise_doubles_with_jitter() -> None:
    low, high = (lambda: 0.0), (lambda: 1.0)
    assert [t.retry_delay(n, None, low) for n in (1, 2, 3, 6)] == [0.125, 0.25, 0.5, 2.0]
    assert [t.retry_delay(n, None, high) for n in (1, 2, 3, 6)] == [0.25, 0.5, 1.0, 4.0]
    assert t.retry_delay(1, "1", high) == 1.0  # never sooner than the server asked
    assert t.retry_delay(6, "1", high) == 4.0  # nor sooner than the backoff
    assert t.retry_delay(1, "3600", low) is None  # longer than MAX_RETRY_AFTER: give up
    assert t.retry_delay(1, "Wed, 21 Oct 2015 07:28:00 GMT", low) == 0.125


def test_creating_calls_carry_a_key_of_their_own_and_are_safe_to_repeat() -> None:
    job = c.create_job(None, {"name": "n"})
    key = msgspec.json.decode(job.body)["idempotency_key"]
    assert key.startswith("client:") and t.retry_safe(job)
    given = c.create_job({"name": "n", "idempotency_key": "mine"}, {})
    assert msgspec.json.decode(given.body)["idempotency_key"] == "mine"
    batch = msgspec.json.decode(c.create_jobs([{"name": "a"}, {"name": "b"}]).body)["jobs"]
    assert len({item["idempotency_key"] for item in batch}) == 2
    assert t.retry_safe(c.trigger_job("j")) and t.retry_safe(c.retry_run("r", None))
    assert t.retry_safe(c.signal_run("r", "go", {}, None, None))
    assert t.retry_safe(c.get_job("j"))
    assert not t.retry_safe(c.pause_job("j", None))  # no key makes a pause safe to repeat
    assert not t.retry_safe(c.delete_job("j"))


def test_next_delay_is_for_503s_and_lost_connections_within_the_limit() -> None:
    get = c.get_job("j")
    unavailable = httpx.Response(503, headers={"Retry-After": "1"})
    assert t.next_delay(get, 1, 3, unavailable) == 1.0
    assert t.next_delay(get, 4, 3, unavailable) is None  # the limit reached
    assert t.next_delay(get, 1, 3, httpx.Response(500)) is None
    assert t.next_delay(get, 1, 3, httpx.ConnectError("refused")) is not None
    assert t.next_delay(get, 1, 3, httpx.ReadTimeout("slow")) is None
    assert t.next_delay(c.pause_job("j", None), 1, 3, unavailable) is None


def answers(*statuses: int) -> tuple[httpx.MockTransport, list[bytes]]:
    bodies: list[bytes] = []
    queue = list(statuses)

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        status = queue.pop(0)
        if status == 0:
            raise httpx.ConnectError("connection refused")
        if status == 503:
            return httpx.Response(503, headers={"Retry-After": "0"}, json={
                "type": "https://ostinato.dev/problems/service-unavailable",
                "title": "Service unavailable", "status": 503, "detail": "retry"})
        return httpx.Response(status, json={"status": "paused", "job_id": "j"})
    return httpx.MockTransport(handle), bodies


def test_the_client_sends_a_safe_call_again_with_the_same_key() -> None:
    transport, bodies = answers(0, 503, 201)
    with Client("http://api.test", "k", transport=transport) as client:
        with pytest.raises(ApiError) as raised:  # the stub's answer is no job: decoded last
            client.send(c.create_job(None, {"name": "n"}))
    assert raised.value.status == 201
    assert len(bodies) == 3 and len(set(bodies)) == 1


def test_retries_zero_and_unsafe_calls_raise_the_first_503() -> None:
    transport, bodies = answers(503, 200)
    with Client("http://api.test", "k", transport=transport, retries=0) as client, \
            pytest.raises(ApiError) as raised:
        client.jobs.get("j")
    assert raised.value.status == 503 and len(bodies) == 1
    transport, bodies = answers(503, 200)
    with Client("http://api.test", "k", transport=transport) as client, \
            pytest.raises(ApiError):
        client.jobs.pause("j")
    assert len(bodies) == 1
    with pytest.raises(ValueError, match="retries"):
        Client("http://api.test", retries=-1)
