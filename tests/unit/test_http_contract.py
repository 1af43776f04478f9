"""The pure rules of the HTTP contract (docs/API.md): which problems an operation documents,
and which date-times a body may carry, found from its msgspec type."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
import pytest

from ostinato.runtime.contract import error_statuses
from ostinato.runtime.instants import instant_errors
from ostinato.wire.api import BackfillRequest, JobBatchRequest


class Inner(msgspec.Struct):
    when: datetime | None = None
    label: str = ""


class Outer(msgspec.Struct):
    at: Annotated[datetime, msgspec.Meta(tz=True)]
    items: list[Inner] = []
    by_name: dict[str, Inner] = {}
    later: list[datetime] | None = None


def fields(value: object, t: object) -> list[str]:
    return [e["field"] for e in instant_errors(value, msgspec.inspect.type_info(t), "")]


def test_every_date_time_under_a_type_is_checked_by_its_path() -> None:
    body = {"at": 0, "items": [{"when": "2026-01-01T00:00:00Z"}, {"when": "2026-01-01"}],
            "by_name": {"x": {"when": 5}}, "later": ["2026-01-01T00:00:00+02:00", None]}
    assert fields(body, Outer) == ["at", "items[1].when", "by_name.x.when", "later[1]"]


@pytest.mark.parametrize("value", ["2026-12-01T09:00:00Z", "2026-12-01t09:00:00z",
                                   "2026-12-01T09:00:00.5+05:30", "2026-12-01 09:00:00-01:00"])
def test_rfc3339_with_an_offset_passes(value: str) -> None:
    assert fields({"at": value}, Outer) == []


@pytest.mark.parametrize("value", [0, 1.5, True, "2026-12-01T09:00:00", "2026-12-01",
                                   "09:00:00Z", "2026-12-01T09:00Z", "", [], {}])
def test_anything_else_is_named(value: object) -> None:
    assert fields({"at": value}, Outer) == ["at"]


def test_shapes_that_do_not_fit_are_left_to_msgspec() -> None:
    assert fields({"items": "nope", "by_name": [1]}, Outer) == []
    assert fields([1, 2], Outer) == []
    assert fields({"items": [None, 3]}, Outer) == []


def test_the_public_models_are_covered() -> None:
    assert fields({"jobs": [{"name": "a", "schedule": {"at": 0}}]}, JobBatchRequest) == [
        "jobs[0].schedule.at"]
    assert fields({"start": "2026-01-01T00:00:00", "end": 1}, BackfillRequest) == [
        "start", "end"]


def test_error_statuses_follow_what_an_operation_takes() -> None:
    assert error_statuses(authenticated=False, method="GET", has_body=False,
                          has_parameters=False) == []
    assert error_statuses(authenticated=True, method="GET", has_body=False,
                          has_parameters=False) == [400, 401, 403, 404, 422, 429, 503]
    assert error_statuses(authenticated=True, method="POST", has_body=True,
                          has_parameters=False) == [400, 401, 403, 404, 409, 413, 422, 429,
                                                    503]
    assert error_statuses(authenticated=False, method="DELETE", has_body=False,
                          has_parameters=True) == [400, 404, 409, 422]
    assert error_statuses(authenticated=True, method="GET", has_body=False,
                          has_parameters=False, rate_limited=False) == [400, 401, 403, 404, 422,
                                                                        503]
