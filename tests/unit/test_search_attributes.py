"""The pure rules of searchable attributes (`ostinato.domain.attributes`): declarations and
the cap, values checked and stored per type, `where` expressions parsed into a typed filter
whose values reach SQL only as bind parameters."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ostinato.domain import attributes as a
from ostinato.domain.errors import InvalidInput
from ostinato.domain.workflow import ATTRIBUTES_STEP, KINDS, StepKind, kind_of

TYPES = {"customer": "keyword", "note": "text", "amount": "int", "ratio": "float",
         "vip": "bool", "due": "datetime"}


def test_a_declaration_is_new_a_repeat_or_refused() -> None:
    assert a.check_declaration("customer", "keyword", {}, 20) is True
    assert a.check_declaration("customer", "keyword", {"customer": "keyword"}, 20) is False
    with pytest.raises(InvalidInput, match="declared as keyword"):
        a.check_declaration("customer", "int", {"customer": "keyword"}, 20)
    with pytest.raises(InvalidInput, match="the most it may"):
        a.check_declaration("one_more", "int", {f"n{i}": "int" for i in range(20)}, 20)
    for bad in ("", "9lives", "a-b", "x" * 64, "a b"):
        with pytest.raises(InvalidInput):
            a.check_declaration(bad, "int", {}, 20)
    with pytest.raises(InvalidInput):
        a.check_declaration("x", "uuid", {}, 20)


def test_values_are_checked_against_their_types_and_stored_canonically() -> None:
    stored = a.normalise({"customer": "acme", "amount": 5, "ratio": 2, "vip": True,
                          "due": "2026-12-01T10:00:00+01:00", "note": "hello"}, TYPES)
    assert stored == {"customer": "acme", "amount": 5, "ratio": 2, "vip": True,
                      "due": "2026-12-01T09:00:00.000000Z", "note": "hello"}
    assert a.normalise(None, TYPES) is None and a.normalise({}, TYPES) is None
    for name, value in [("nope", 1), ("amount", True), ("amount", 1.5), ("amount", 2**63),
                        ("ratio", float("nan")), ("vip", "yes"), ("customer", 1),
                        ("customer", "x" * 257), ("due", "2026-12-01T10:00:00"),  # no offset
                        ("due", "soon")]:
        with pytest.raises(InvalidInput) as e:
            a.normalise({name: value}, TYPES)
        assert e.value.errors[0]["field"] == f"attributes.{name}"


def test_datetime_text_orders_as_time() -> None:
    early = a.datetime_text(datetime(2026, 1, 1, 23, 0, tzinfo=UTC))
    late = a.datetime_text(datetime.fromisoformat("2026-01-02T00:30:00+01:00"))  # 23:30 UTC
    assert early < late


def test_where_parses_into_equalities_and_comparisons() -> None:
    f = a.parse_where(["customer=acme", "amount>100", "amount<=500", "vip=true",
                       "note~Urgent", "due>=2026-12-01T09:00:00Z", "ratio!=0.5"], TYPES)
    assert f.equals == {"customer": "acme", "vip": True}
    assert [(c.name, c.op, c.value) for c in f.compare] == [
        ("amount", ">", 100), ("amount", "<=", 500), ("note", "~", "urgent"),
        ("due", ">=", "2026-12-01T09:00:00.000000Z"), ("ratio", "!=", 0.5)]
    assert a.bind_args(f) == ({"customer": "acme", "vip": True},
                              ["amount", "amount", "note", "due", "ratio"],
                              [">", "<=", "~", ">=", "!="],
                              [100, 500, "urgent", "2026-12-01T09:00:00.000000Z", 0.5],
                              "amount", 100, None, None, 500)  # the range the btree answers
    assert not a.parse_where(None, TYPES) and not a.parse_where([], TYPES)
    # a value is a value, whatever it holds: it never becomes SQL
    assert a.parse_where(["customer=acme' OR 1=1 --"], TYPES).equals == {
        "customer": "acme' OR 1=1 --"}


def test_the_indexed_range_is_the_first_numeric_attributes_tightest_bounds() -> None:
    f = a.parse_where(["due>2026-01-01T00:00:00Z", "ratio>=0.5", "amount>3", "ratio>=0.7",
                       "ratio<2", "ratio!=1"], TYPES)
    assert a.indexed_range(f) == ("ratio", None, 0.7, 2, None)  # datetimes are not numbers
    assert a.indexed_range(a.parse_where(["customer=x"], TYPES)) == (None,) * 5


@pytest.mark.parametrize("expr", ["customer", "=acme", "nope=1", "amount>ten", "vip>true",
                                  "amount~1", "customer~", "due>tomorrow", "amount=1.5",
                                  "vip=maybe"])
def test_a_malformed_or_mistyped_where_is_refused(expr: str) -> None:
    with pytest.raises(InvalidInput) as e:
        a.parse_where([expr], TYPES)
    assert e.value.errors[0]["field"] == "where"


def test_at_most_ten_expressions_and_one_value_per_equality() -> None:
    with pytest.raises(InvalidInput, match="at most"):
        a.parse_where(["amount>1"] * 11, TYPES)
    with pytest.raises(InvalidInput, match="two values"):
        a.parse_where(["customer=a", "customer=b"], TYPES)


def test_the_upsert_is_a_kind_of_the_step_model() -> None:
    assert kind_of(name=ATTRIBUTES_STEP) is StepKind.ATTRIBUTES
    assert KINDS[StepKind.ATTRIBUTES].records == ("AttributesUpserted",)
    assert KINDS[StepKind.ATTRIBUTES].suspends is None
    assert kind_of(name="attributes") is StepKind.STEP
