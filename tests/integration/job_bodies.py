"""Generated `POST /v1/jobs` bodies, for every test that feeds them somewhere: the generator
schemathesis fuzzes the operation with (test_schemathesis.py runs it over HTTP), drawn here as a
hypothesis strategy from the same OpenAPI document, valid and invalid, plus what a Kafka producer
can send and HTTP clients rarely do: NUL and lone surrogates in any string, bytes that are not
UTF-8 or not JSON. A test module imports this, never another test module."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

OPENAPI = Path(__file__).resolve().parents[2] / "schemas" / "openapi.json"
HOSTILE = ["\x00", "a\x00b", "\ud800", "x\udfffy", "\x00\ud800"]  # NUL, lone surrogates
# The free-text fields of a job (no pattern refuses NUL in them before they are stored).
TEXT_FIELDS = ["idempotency_key", "concurrency_key", "timeout", "queue_wait_timeout",
               "complete_within", "task"]


@cache
def _operation() -> Any:
    import schemathesis  # an optional test dependency: callers importorskip it

    return schemathesis.openapi.from_dict(json.loads(OPENAPI.read_text()))["/v1/jobs"]["POST"]


def schemathesis_bodies() -> st.SearchStrategy[Any]:
    """What schemathesis sends as the body of `POST /v1/jobs`: valid and invalid (a JSON
    value, or bytes)."""
    from schemathesis import GenerationMode

    op = _operation()
    return st.one_of(*(op.as_strategy(generation_mode=mode).map(lambda case: case.body)
                       for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)))


def _poison(body: Any, draw: st.DrawFn) -> Any:
    """The body with one of its strings (or keys), if it has any, holding NUL or a lone
    surrogate."""
    if isinstance(body, str):
        return body + draw(st.sampled_from(HOSTILE))
    if isinstance(body, list) and body:
        i = draw(st.integers(0, len(body) - 1))
        return [*body[:i], _poison(body[i], draw), *body[i + 1:]]
    if isinstance(body, dict) and body:
        key = draw(st.sampled_from(sorted(body, key=str)))
        if draw(st.booleans()) and isinstance(body[key], dict | list | str):
            return {**body, key: _poison(body[key], draw)}
        return {**{k: v for k, v in body.items() if k != key},
                str(key) + draw(st.sampled_from(HOSTILE)): body[key]}
    return body


@st.composite
def _poisoned(draw: st.DrawFn) -> Any:
    return _poison(draw(schemathesis_bodies()), draw)


@st.composite
def _poisoned_text(draw: st.DrawFn) -> Any:
    """A valid body with NUL or a lone surrogate in one of its free-text fields."""
    body = draw(_operation().as_strategy().map(lambda case: case.body))
    text = draw(st.text(max_size=8)) + draw(st.sampled_from(HOSTILE))
    return {**body, draw(st.sampled_from(TEXT_FIELDS)): text} if isinstance(body, dict) else body


def encode(body: Any) -> bytes:
    """A generated body as a message value: bytes as they are, anything else as JSON (NUL and
    lone surrogates as \\u escapes, which a JSON decoder refuses or keeps as they are)."""
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def message_values() -> st.SearchStrategy[bytes]:
    """Message values for a Kafka submit topic: schemathesis's bodies, the same with NUL or a
    lone surrogate in a string (any, or a free-text field of a valid body), and arbitrary
    bytes."""
    return st.one_of(schemathesis_bodies().map(encode), _poisoned().map(encode),
                     _poisoned_text().map(encode), st.binary(max_size=64))
