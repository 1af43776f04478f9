"""What a bulk operation's filter selects, per kind (`ostinato.operations.filters`): every
field against every kind, every run state against cancel and retry, the defaults."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import msgspec
import pytest

from ostinato.domain.errors import InvalidInput
from ostinato.operations import filters
from ostinato.wire.api import FINAL_STATES, OPERATION_KINDS, RUN_STATES, OperationFilter

JOB = uuid.uuid4()
T0, T1 = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
ONE_OF_EACH = {"states": ["scheduled"], "job_id": JOB, "task": "t", "pool": "p", "since": T0,
               "until": T1, "error_type": "e", "triage_state": "new"}


def test_every_field_is_a_filter_of_some_kind_and_the_kinds_are_the_wire_kinds() -> None:
    assert set(filters.FIELDS) == set(OPERATION_KINDS)
    assert set().union(*filters.FIELDS.values()) == set(OperationFilter.__struct_fields__)


@pytest.mark.parametrize("kind", OPERATION_KINDS)
@pytest.mark.parametrize("field", list(ONE_OF_EACH))
def test_a_field_is_taken_by_the_kinds_that_have_it_and_refused_by_the_others(
        kind: str, field: str) -> None:
    value = ONE_OF_EACH[field]
    if kind == "retry" and field == "states":
        value = ["cancelled"]
    f = OperationFilter(**{field: value})
    if field in filters.FIELDS[kind]:
        filters.selection(kind, f)
    else:
        with pytest.raises(InvalidInput) as refused:
            filters.selection(kind, f)
        assert refused.value.errors == [{"field": f"filter.{field}", "message": refused.value
                                         .errors[0]["message"]}]


@pytest.mark.parametrize("state", RUN_STATES)
def test_cancel_takes_the_unfinished_states_and_retry_the_rerunnable_ones(state: str) -> None:
    for kind, allowed in (("cancel", state not in FINAL_STATES),
                          ("retry", state in ("failed", "cancelled", "dead_lettered"))):
        f = OperationFilter(states=[state])
        if allowed:
            assert filters.selection(kind, f)[0] == [state]
        else:
            with pytest.raises(InvalidInput):
                filters.selection(kind, f)


NO_WHERE = (False, {}, [], [], [], None, None, None, None, None)  # no searchable attributes


def test_the_defaults_and_the_argument_order_of_the_queries() -> None:
    assert filters.selection("cancel", OperationFilter()) == (
        list(filters.CANCELLABLE), None, None, None, None, None, *NO_WHERE)
    assert "succeeded" not in filters.CANCELLABLE and "failed" in filters.CANCELLABLE
    assert filters.selection("retry", OperationFilter(task="t")) == (
        ["dead_lettered"], None, "t", None, None, None, *NO_WHERE)
    assert filters.selection("cancel", OperationFilter(
        states=["queued", "queued", "scheduled"], job_id=JOB, pool="p", since=T0, until=T1)) == (
        ["queued", "scheduled"], JOB, None, "p", T0, T1, *NO_WHERE)
    # searchable attributes: parsed against the tenant's declarations into bind parameters
    assert filters.selection("cancel", OperationFilter(where=["customer=acme", "amount>5"]),
                             {"customer": "keyword", "amount": "int"})[6:] == (
        True, {"customer": "acme"}, ["amount"], [">"], [5], "amount", 5, None, None, None)
    with pytest.raises(InvalidInput):
        filters.selection("cancel", OperationFilter(where=["customer=acme"]), {})
    with pytest.raises(InvalidInput):  # dead letters have no attributes
        filters.selection("replay", OperationFilter(where=["customer=acme"]))
    assert filters.selection("replay", OperationFilter(error_type="e")) == (None, "e", None)
    assert filters.selection("pause", OperationFilter(pool="p")) == ("active", None, "p")


def test_an_empty_range_is_refused_and_the_filter_is_recorded_as_given() -> None:
    with pytest.raises(InvalidInput):
        filters.selection("cancel", OperationFilter(since=T1, until=T1))
    assert filters.given(OperationFilter(task="t", since=T0)) == {
        "task": "t", "since": "2026-01-01T00:00:00Z"}
    assert filters.given(OperationFilter()) == {}


def test_an_instant_without_an_offset_is_refused_on_the_wire() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"since": "2026-01-01T00:00:00"}', type=OperationFilter)
