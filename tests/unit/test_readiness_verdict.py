"""Readiness means "can do its work" (issue 42): a required check failing is a 503, a degraded
one (Kafka behind the outbox) a 200 that says so; and which database errors mean "the server
refuses writes", remembered for a window (ostinato.db.health)."""

from __future__ import annotations

import asyncpg
import pytest
from litestar.testing import TestClient
from prometheus_client import REGISTRY

from ostinato.db.health import WriteHealth, refuses_writes
from ostinato.runtime.ops import Degraded, ops_app, readyz_answer


def test_all_checks_passing_is_ready() -> None:
    assert readyz_answer({"postgres": True, "kafka": True}) == (
        200, {"status": "ready", "checks": {"postgres": True, "kafka": True}})


def test_a_degraded_dependency_down_is_200_degraded_with_its_reason() -> None:
    status, body = readyz_answer({"postgres": True, "postgres_writes": True,
                                  "kafka": Degraded("unreachable (checked 1.0 s ago)")})
    assert status == 200
    assert body == {"status": "degraded",
                    "checks": {"postgres": True, "postgres_writes": True, "kafka": False},
                    "degraded": ["kafka"],
                    "reasons": {"kafka": "unreachable (checked 1.0 s ago)"}}


def test_a_required_check_failing_is_503_even_with_a_degraded_one() -> None:
    status, body = readyz_answer({"postgres": "no answer within 0.8 s",
                                  "kafka": Degraded("unreachable")})
    assert status == 503
    assert body["status"] == "not ready"
    assert body["degraded"] == ["kafka"]
    assert body["reasons"] == {"postgres": "no answer within 0.8 s", "kafka": "unreachable"}


def test_writes_refused_is_503() -> None:
    status, body = readyz_answer({"postgres": True, "postgres_writes": "53100 DiskFullError"})
    assert status == 503 and body["checks"]["postgres_writes"] is False


def test_the_checks_failing_themselves_is_503() -> None:
    assert readyz_answer({"readiness": False}, "TimeoutError")[0] == 503


def test_the_ops_app_answers_degraded_with_200() -> None:
    async def readiness() -> dict[str, bool | str | Degraded]:
        return {"postgres": True, "kafka": Degraded("unreachable")}

    with TestClient(ops_app("dispatcher", readiness)) as client:
        response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["status"] == "degraded"
    assert response.json()["degraded"] == ["kafka"]


@pytest.mark.parametrize(("sqlstate", "refused"), [
    ("53100", True),  # disk_full
    ("53200", True),  # out_of_memory
    ("53000", True),  # insufficient_resources
    ("58030", True),  # io_error
    ("25006", True),  # read_only_sql_transaction
    ("23505", False),  # unique_violation: the statement's fault
    ("42P01", False),  # undefined_table
    ("40001", False),  # serialization_failure
    ("", False),
    (None, False),
])
def test_which_sqlstates_mean_the_server_refuses_writes(sqlstate: str | None,
                                                        refused: bool) -> None:
    assert refuses_writes(sqlstate) is refused


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_refused_write_fails_readiness_for_the_window_then_clears() -> None:
    ticks = Ticks()
    health = WriteHealth(window=30.0, monotonic=ticks)
    before = REGISTRY.get_sample_value("ostinato_database_write_errors_total",
                                       {"sqlstate": "53100"}) or 0.0
    assert health.failing() is None
    assert health.note(asyncpg.exceptions.DiskFullError("could not extend file")) is True
    assert REGISTRY.get_sample_value("ostinato_database_write_errors_total",
                                     {"sqlstate": "53100"}) == before + 1
    assert REGISTRY.get_sample_value("ostinato_database_writes_failing") == 1
    ticks.now += 29.0
    failing = health.failing()
    assert failing is not None and failing.startswith("53100 DiskFullError: could not extend")
    ticks.now += 1.0
    assert health.failing() is None


def test_an_error_of_the_statement_itself_is_not_a_refused_write() -> None:
    health = WriteHealth(monotonic=Ticks())
    assert health.note(asyncpg.exceptions.UniqueViolationError("duplicate key")) is False
    assert health.note(ValueError("not a database error")) is False
    assert health.failing() is None
