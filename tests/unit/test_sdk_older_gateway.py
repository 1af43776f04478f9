"""Main's worker SDK against a worker-gateway of the previous release (a rolling upgrade,
docs/UPGRADES.md): that gateway's requests forbid unknown fields, so a claim carrying a field
it predates (`liveness_seconds`, issue 39) is a 422 naming it. The worker sends the claim again
without the field instead of stopping, and offers it again later (the gateway behind the
address may have been upgraded by then). Found by tests/compat/test_mixed_versions.py: the
worker stopped at its first claim."""

from __future__ import annotations

import httpx
import msgspec
import pytest

from ostinato.sdk import GatewayError, current, task
from ostinato.sdk import worker as worker_module
from ostinato.testing.gateway import API_KEY, FakeGateway, running
from ostinato.wire import worker as p
from tests.helpers.waiting import eventually

REFUSAL = p.Problem(title="Invalid liveness_seconds", status=422,
                    detail="liveness_seconds: Object contains unknown field `liveness_seconds`")


class OlderGateway(FakeGateway):
    """The fake gateway, refusing claims that carry `liveness_seconds` as 8193fb1's did."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[dict[str, object]] = []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == p.CLAIM_PATH:
            body = msgspec.json.decode(request.content)
            if "liveness_seconds" in body:
                self.refused.append(body)
                return httpx.Response(422, content=msgspec.json.encode(REFUSAL))
        return await super().handle(request)


@task("echo")
async def echo(payload: int) -> int:
    return payload + current().attempt


async def test_a_claim_refused_for_a_field_the_gateway_predates_is_sent_again_without_it(
        ) -> None:
    gw = OlderGateway()
    run_id = await gw.add("echo", 41)
    async with running(gw, [echo], claim_wait_seconds=0.05):
        await eventually(lambda: run_id in gw.completions())
    assert gw.completions()[run_id].output == 42
    assert len(gw.refused) == 1  # refused once, then left out of every claim
    assert gw.claims and all(c.liveness_seconds is None for c in gw.claims)


async def test_the_field_is_offered_again_after_a_while(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "REFUSED_FIELD_SECONDS", 0.0)
    gw = OlderGateway()
    async with running(gw, [echo], claim_wait_seconds=0.01):
        await eventually(lambda: len(gw.refused) >= 3 and len(gw.claims) >= 3)


async def test_a_refusal_naming_no_optional_field_still_stops_the_worker() -> None:
    gw = FakeGateway()
    gw.claim_status = 422
    client = httpx.AsyncClient(transport=httpx.MockTransport(gw.handle))
    worker = worker_module.Worker("http://gateway.test", API_KEY, [echo], http_client=client)
    with pytest.raises(GatewayError) as raised:
        await worker.run()
    assert raised.value.status == 422 and len(gw.claims) == 1
    await client.aclose()


def test_refused_field_reads_only_optional_fields_named_as_unknown() -> None:
    optional = {"liveness_seconds": None}
    assert worker_module.refused_field(
        GatewayError(422, REFUSAL.title, REFUSAL.detail), optional) == "liveness_seconds"
    assert worker_module.refused_field(
        GatewayError(422, "Invalid worker_id", "Object contains unknown field `worker_id`"),
        optional) is None
    assert worker_module.refused_field(
        GatewayError(401, REFUSAL.title, REFUSAL.detail), optional) is None
