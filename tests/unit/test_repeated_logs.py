"""Repeated log lines are written once per interval with a count (issue 42: a Kafka outage of
36 s wrote 10,000 lines). An injected clock stands in for time: every assertion is about which
lines were written and what they counted."""

from __future__ import annotations

import json
import logging

import pytest
import structlog
from structlog.testing import capture_logs

from ostinato.telemetry.logging import (
    RateLimitedLogger,
    RepeatFilter,
    Repeats,
    configure_logging,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_of_a_kind_is_written_then_one_per_interval_with_the_count_held_back() -> None:
    clock = Clock()
    repeats = Repeats(10.0, clock=clock)
    admitted = []
    for _ in range(25):  # one line a second for 25 s
        admitted.append(repeats.admit("kafka down"))
        clock.now += 1.0
    written = [(i, held) for i, held in enumerate(admitted) if held is not None]
    assert written == [(0, 0), (10, 9), (20, 9)]


def test_kinds_are_counted_apart_and_a_quiet_kind_starts_again_at_once() -> None:
    clock = Clock()
    repeats = Repeats(10.0, clock=clock)
    assert repeats.admit("a") == 0
    assert repeats.admit("b") == 0  # another kind is not held back by the first
    assert repeats.admit("a") is None
    clock.now += 60.0
    assert repeats.admit("a") == 1  # after a quiet minute: at once, with the one held back


def test_the_least_recent_kinds_are_forgotten_past_the_cap() -> None:
    clock = Clock()
    repeats = Repeats(10.0, clock=clock, max_kinds=2)
    repeats.admit("a")
    repeats.admit("b")
    repeats.admit("c")  # "a" is forgotten: it is the first of its kind again
    assert repeats.admit("a") == 0
    assert repeats.admit("c") is None


def test_the_logger_keys_lines_by_event_error_type_and_kind() -> None:
    clock = Clock()
    log = RateLimitedLogger("ostinato.test", 10.0, clock=clock)
    with capture_logs() as lines:
        for _ in range(5):
            log.warning("tick failed", ConnectionRefusedError("refused"), kind="relay")
            log.warning("tick failed", ConnectionRefusedError("refused"), kind="due_poll")
            log.error("tick failed", TimeoutError("slow"), kind="relay")
        clock.now += 10.0
        log.warning("tick failed", ConnectionRefusedError("refused"), kind="relay")
    assert [(x["log_level"], x["error"], x.get("repeated")) for x in lines] == [
        ("warning", "ConnectionRefusedError('refused')", None),
        ("warning", "ConnectionRefusedError('refused')", None),
        ("error", "TimeoutError('slow')", None),
        ("warning", "ConnectionRefusedError('refused')", 4),
    ]


@pytest.fixture
def isolated_logging():
    """configure_logging is process-global: put structlog and the root logger back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.captureWarnings(False)


def test_stdlib_records_repeated_by_a_library_are_held_back_and_counted(
        capsys: pytest.CaptureFixture[str], isolated_logging: None) -> None:
    configure_logging("dispatcher")
    kafka = logging.getLogger("aiokafka.test")
    for node in range(50):  # aiokafka: one line per reconnect to a broker that is down
        kafka.error("Unable connect to node with id %s", node)
    kafka.warning("another message")
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.strip()]
    assert [x["event"] for x in lines] == ["Unable connect to node with id 0", "another message"]

    clock = Clock()
    repeat = RepeatFilter(10.0, clock=clock)
    record = logging.LogRecord("aiokafka", logging.ERROR, __file__, 1, "down %s", ("b-1",), None)
    assert [repeat.filter(record) for _ in range(3)] == [True, False, False]
    clock.now += 10.0
    assert repeat.filter(record) and record.repeated == 2
    (handler,) = [h for h in logging.getLogger().handlers if repeat.__class__ in
                  {type(f) for f in h.filters}]
    assert json.loads(handler.format(record))["repeated"] == 2  # the count reaches the line
