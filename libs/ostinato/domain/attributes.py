"""Searchable attributes (docs/SEARCH_ATTRIBUTES.md): what a tenant may declare, how a value is
checked against its declared type and stored, and how a `where` expression becomes a typed
filter. Pure: the api and the worker-gateway call these with the tenant's declarations; the
store turns an `AttributeFilter` into bind parameters of fixed SQL (never SQL text).

Values are stored as one jsonb object per run (and job): keyword and text as strings, int and
float as numbers, bool as booleans, datetime as a UTC string of fixed width
(`2026-12-01T09:00:00.000000Z`), so that comparing two of them as strings compares instants.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from ostinato.domain.errors import InvalidInput

TYPES: Final = ("keyword", "text", "int", "float", "bool", "datetime")
DEFAULT_CAP: Final = 20  # declared names per tenant (OSTINATO_SEARCH_ATTRIBUTES_CAP)
NAME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
MAX_KEYWORD: Final = 256  # characters of a keyword value
MAX_TEXT: Final = 2048  # characters of a text value
MAX_WHERE: Final = 10  # expressions in one filter
INT_RANGE: Final = (-(2**63), 2**63 - 1)
OPS: Final = ("!=", ">=", "<=", "=", ">", "<", "~")  # longest first: how they are parsed
ORDERED: Final = frozenset({"int", "float", "datetime", "keyword"})
RANGE_OPS: Final = (">", ">=", "<", "<=")
_EXPR = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*(!=|>=|<=|=|>|<|~)\s*(.*?)\s*$", re.S)


def _bad(field_name: str, message: str) -> InvalidInput:
    return InvalidInput(f"{field_name}: {message}",
                        errors=[{"field": field_name, "message": message}])


def check_declaration(name: str, type_: str, declared: Mapping[str, str], cap: int) -> bool:
    """Whether declaring `name` as `type_` adds a name (False: the same declaration exists, a
    repeat); refuses a bad name or type, another type for a declared name, or one over the cap."""
    if not NAME.match(name):
        raise _bad("name", "1 to 63 letters, digits or _, starting with a letter")
    if type_ not in TYPES:
        raise _bad("type", f"one of {', '.join(TYPES)}")
    if name in declared:
        if declared[name] != type_:
            raise _bad("type", f"{name!r} is declared as {declared[name]}; remove it first to "
                               f"declare it again as {type_}")
        return False
    if len(declared) >= cap:
        raise _bad("name", f"this tenant has declared {len(declared)} attributes, the most it "
                           f"may (remove one first)")
    return True


def datetime_text(at: datetime) -> str:
    """How a datetime value is stored: UTC, fixed width, so text order is time order."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _value(name: str, type_: str, value: Any, where: str) -> Any:
    """`value` as stored for `type_`, or a 422 naming `where`."""
    if type_ in ("keyword", "text"):
        limit = MAX_KEYWORD if type_ == "keyword" else MAX_TEXT
        if not isinstance(value, str) or len(value) > limit or "\x00" in value:
            raise _bad(where, f"{name!r} is a {type_}: a string of at most {limit} characters")
        return value
    if type_ == "int":
        if isinstance(value, bool) or not isinstance(value, int) or not (
                INT_RANGE[0] <= value <= INT_RANGE[1]):
            raise _bad(where, f"{name!r} is an int: a whole number that fits in 64 bits")
        return value
    if type_ == "float":
        if isinstance(value, bool) or not isinstance(value, int | float) or (
                isinstance(value, float) and not math.isfinite(value)):
            raise _bad(where, f"{name!r} is a float: a finite number")
        return value
    if type_ == "bool":
        if not isinstance(value, bool):
            raise _bad(where, f"{name!r} is a bool: true or false")
        return value
    at = value
    if isinstance(value, str):
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            at = None
    if not isinstance(at, datetime) or at.tzinfo is None:
        raise _bad(where, f"{name!r} is a datetime: an RFC 3339 instant with its offset")
    return datetime_text(at)


def normalise(values: Mapping[str, Any] | None, declared: Mapping[str, str], *,
              where: str = "attributes") -> dict[str, Any] | None:
    """The values as stored (None for none), each checked against its declared type; an
    undeclared name or a value of another type is a 422 naming the attribute."""
    if not values:
        return None
    out: dict[str, Any] = {}
    for name, value in values.items():
        type_ = declared.get(name)
        if type_ is None:
            raise _bad(f"{where}.{name}",
                       f"{name!r} is not a declared search attribute of this tenant "
                       f"(declare it with PUT /v1/search-attributes/{{name}})")
        out[name] = _value(name, type_, value, f"{where}.{name}")
    return out


@dataclass(frozen=True)
class Comparison:
    name: str
    op: str  # != > >= < <= ~
    value: Any  # as stored
    numeric: bool = False  # an int or float attribute (run_attribute_numbers has its values)


@dataclass(frozen=True)
class AttributeFilter:
    """What `where` selects: every equality (all at once, a jsonb containment the GIN index
    answers) and every comparison must hold."""

    equals: dict[str, Any] = field(default_factory=dict)
    compare: tuple[Comparison, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.equals or self.compare)


def _json_type(value: Any) -> str | None:
    """jsonb_typeof of a stored value (a bool is no number here, as in jsonb)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else None


def _holds(c: Comparison, stored: Any) -> bool:
    if c.op == "~":
        return isinstance(stored, str) and c.value in stored.lower()
    if stored is None or _json_type(stored) != _json_type(c.value):
        return False
    if c.op == "!=":
        return bool(stored != c.value)
    if isinstance(stored, bool):
        return False  # booleans have no order (parse_where refuses one; never true)
    return {">": stored > c.value, ">=": stored >= c.value, "<": stored < c.value,
            "<=": stored <= c.value}[c.op]


def matches(f: AttributeFilter, values: Mapping[str, Any] | None) -> bool:
    """Whether attributes as stored pass `f`, as the run list's SQL decides it
    (stores/sql/attributes.sql): for rows read outside the database, such as an archive
    index's (`GET /v1/runs?include=archived`). A missing attribute, or one of another type,
    never matches."""
    got = values or {}
    for name, value in f.equals.items():
        if name not in got or _json_type(got[name]) != _json_type(value) or got[name] != value:
            return False
    return all(_holds(c, got.get(c.name)) for c in f.compare)


def indexed_range(f: AttributeFilter) -> tuple[Any, ...]:
    """(name, >, >=, <, <=) bounds of the first numeric attribute the filter compares (None
    where unbounded; all None: no range), for the btree of run_attribute_numbers: a range that
    matches few runs is found there instead of by walking the tenant's runs."""
    ranged = next((c.name for c in f.compare if c.numeric and c.op in RANGE_OPS), None)
    bounds: dict[str, Any] = dict.fromkeys(RANGE_OPS)
    for c in f.compare:
        if c.name == ranged and c.op in RANGE_OPS:
            keep = max if c.op in (">", ">=") else min
            bounds[c.op] = c.value if bounds[c.op] is None else keep(bounds[c.op], c.value)
    return (ranged, *(bounds[op] for op in RANGE_OPS))


def split_where(text: str | None) -> list[str]:
    """The web UI's one-box form of `where`: expressions joined by ` and `."""
    return [e.strip() for e in re.split(r"\s+and\s+", text or "", flags=re.I) if e.strip()]


def join_where(exprs: Sequence[str] | None) -> str:
    return " and ".join(exprs or [])


def bind_args(f: AttributeFilter) -> tuple[Any, ...]:
    """The filter as bind parameters of fixed SQL: the equalities (one object), the
    comparisons' names, operators and values in step, then `indexed_range`'s five."""
    return (f.equals, [c.name for c in f.compare], [c.op for c in f.compare],
            [c.value for c in f.compare], *indexed_range(f))


def _literal(name: str, type_: str, text: str, expr: str) -> Any:
    """A value written in a `where` expression, as stored for `type_`."""
    value: Any = text
    if type_ == "int":
        value = int(text) if re.fullmatch(r"[+-]?\d{1,19}", text) else None
    elif type_ == "float":
        try:
            value = float(text)
        except ValueError:
            value = None
    elif type_ == "bool":
        value = {"true": True, "false": False}.get(text.lower())
    if value is None:
        raise _bad("where", f"{expr!r}: {text!r} is not a value of {name!r} ({type_})")
    return _value(name, type_, value, "where")


def parse_where(exprs: Sequence[str] | None, declared: Mapping[str, str]) -> AttributeFilter:
    """`name=value`, `name!=value`, `name>value` (also >=, <, <=: int, float, datetime,
    keyword) and `name~part` (text or keyword containing `part`, case-insensitive), ANDed; a
    malformed expression, an undeclared name, a value of another type or an operator the type
    has none of is a 422 naming the expression."""
    equals: dict[str, Any] = {}
    compare: list[Comparison] = []
    if not exprs:
        return AttributeFilter()
    if len(exprs) > MAX_WHERE:
        raise _bad("where", f"at most {MAX_WHERE} expressions")
    for expr in exprs:
        m = _EXPR.match(expr)
        if m is None:
            raise _bad("where", f"{expr!r} is not name<op>value (op one of "
                                f"{' '.join(OPS)}), e.g. customer=acme or amount>100")
        name, op, text = m.groups()
        type_ = declared.get(name)
        if type_ is None:
            raise _bad("where", f"{expr!r}: {name!r} is not a declared search attribute of "
                                f"this tenant")
        if op in (">", ">=", "<", "<=") and type_ not in ORDERED:
            raise _bad("where", f"{expr!r}: {name!r} is a {type_}, which has no order")
        if op == "~" and type_ not in ("text", "keyword"):
            raise _bad("where", f"{expr!r}: ~ (contains) is for text and keyword attributes")
        if op == "~":
            if not text:
                raise _bad("where", f"{expr!r}: ~ needs some text")
            compare.append(Comparison(name, op, text.lower()))
            continue
        value = _literal(name, type_, text, expr)
        if op == "=":
            if name in equals and equals[name] != value:
                raise _bad("where", f"{name!r} cannot equal two values")
            equals[name] = value
        else:
            compare.append(Comparison(name, op, value, type_ in ("int", "float")))
    return AttributeFilter(equals, tuple(compare))
