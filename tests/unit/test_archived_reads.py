"""The pure parts of reading archived runs (services/api/archived.py, docs/RETENTION.md
"Reading an archived run"): which index rows an archived listing keeps, the days it reads, its
range rules (422s), its cursor; the attribute filter applied outside SQL; an archived run's rows
as the hot side's; an action route refusing an archived run with 409."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
import pytest

from ostinato.archive import ArchivedEvent, ArchivedRun, ArchivedRunSummary, ArchivedStep
from ostinato.domain import attributes
from ostinato.domain.errors import ArchiveUnreadable, InvalidInput, NotFound, RunArchived
from ostinato.domain.events import RunScheduled
from services.api import archived

T0 = datetime(2026, 11, 3, 12, 0, tzinfo=UTC)
DECLARED = {"customer": "keyword", "amount": "int", "note": "text", "vip": "bool",
            "score": "float"}


def row(**over: Any) -> ArchivedRunSummary:
    base: dict[str, Any] = {"id": uuid.uuid4(), "job_id": uuid.uuid4(), "task": "report",
                            "state": "succeeded", "scheduled_for": T0, "created_at": T0,
                            "ended_at": T0 + timedelta(minutes=1), "attempts": 1}
    return ArchivedRunSummary(**{**base, **over})


def test_a_listing_keeps_the_rows_that_ended_in_its_range_and_pass_its_filters() -> None:
    f = archived.summary_filter(T0, T0 + timedelta(days=1))
    assert f.keeps(row(), T0)
    assert not f.keeps(row(ended_at=T0 - timedelta(seconds=1)), T0)
    assert not f.keeps(row(ended_at=T0 + timedelta(days=1)), T0)  # the end is excluded
    # a row with no end is filed under when it was archived (as build_indexes files it)
    assert f.keeps(row(ended_at=None), T0 + timedelta(hours=2))
    assert not f.keeps(row(ended_at=None), T0 + timedelta(days=2))
    job = uuid.uuid4()
    by_job = archived.summary_filter(T0, T0 + timedelta(days=1), job_id=job)
    assert by_job.keeps(row(job_id=job), T0) and not by_job.keeps(row(), T0)
    by_state = archived.summary_filter(T0, T0 + timedelta(days=1), state="cancelled")
    assert by_state.keeps(row(state="cancelled"), T0) and not by_state.keeps(row(), T0)
    by_task = archived.summary_filter(T0, T0 + timedelta(days=1), task="billing")
    assert by_task.keeps(row(task="billing"), T0) and not by_task.keeps(row(), T0)
    since = archived.summary_filter(T0, T0 + timedelta(days=1), since=T0,
                                    until=T0 + timedelta(hours=1))
    assert since.keeps(row(), T0)
    assert not since.keeps(row(scheduled_for=T0 - timedelta(seconds=1)), T0)
    assert not since.keeps(row(scheduled_for=T0 + timedelta(hours=1)), T0)
    where = archived.summary_filter(T0, T0 + timedelta(days=1),
                                    where=attributes.parse_where(["customer=acme"], DECLARED))
    assert where.keeps(row(attributes={"customer": "acme"}), T0)
    assert not where.keeps(row(attributes={"customer": "other"}), T0)
    assert not where.keeps(row(attributes=None), T0)


@pytest.mark.parametrize(("after", "before", "field"), [
    (None, T0, "ended_after"),
    (T0, None, "ended_before"),
    (T0, T0, "ended_before"),  # empty
    (T0, T0 - timedelta(hours=1), "ended_before"),  # reversed
    (T0, T0 + timedelta(days=31, seconds=1), "ended_before"),  # longer than 31 days
])
def test_a_range_missing_reversed_or_too_long_is_a_422_naming_it(
        after: datetime | None, before: datetime | None, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        archived.summary_filter(after, before)
    assert caught.value.status == 422
    assert [e["field"] for e in caught.value.errors] == [field]


def test_31_days_is_the_longest_range() -> None:
    assert len(archived.summary_filter(T0, T0 + timedelta(days=31)).days()) == 32


def test_the_days_read_are_the_range_s_utc_days_latest_first() -> None:
    f = archived.summary_filter(datetime(2026, 11, 3, 23, 0, tzinfo=UTC),
                                datetime(2026, 11, 5, 0, 0, tzinfo=UTC))
    assert f.days() == [date(2026, 11, 4), date(2026, 11, 3)]  # 5 Nov 00:00 is excluded
    berlin = datetime(2026, 11, 6, 0, 30, tzinfo=UTC).astimezone(ZoneInfo("Europe/Berlin"))
    assert archived.summary_filter(berlin - timedelta(hours=1), berlin).days() == [
        date(2026, 11, 6), date(2026, 11, 5)]


def test_an_archive_cursor_round_trips_and_a_forged_one_is_a_422() -> None:
    at = archived.ArchiveCursor(date(2026, 11, 4), "tenants/x/index/2026/11/04/b.json.gz", 7)
    text = archived.encode_cursor(at)
    assert archived.is_archive_cursor(text) and archived.decode_cursor(text) == at
    assert not archived.is_archive_cursor(None)
    assert not archived.is_archive_cursor("MjAyNi0xMS0wM1QxMjowMDowMCswMDowMHwx")  # a hot one
    with pytest.raises(InvalidInput):
        archived.decode_cursor("a.not-base64-json")


@pytest.mark.parametrize(("where", "values", "expected"), [
    (["customer=acme"], {"customer": "acme"}, True),
    (["customer=acme"], {"customer": "other"}, False),
    (["customer=acme"], {}, False),
    (["customer!=acme"], {"customer": "other"}, True),
    (["customer!=acme"], {}, False),  # missing never matches
    (["amount>100"], {"amount": 101}, True),
    (["amount>100"], {"amount": 100}, False),
    (["amount>=100"], {"amount": 100}, True),
    (["amount<100"], {"amount": "99"}, False),  # another type never matches
    (["amount=1"], {"amount": True}, False),  # a bool is no number
    (["vip=true"], {"vip": True}, True),
    (["vip=true"], {"vip": 1}, False),
    (["score<=1.5"], {"score": 1.5}, True),
    (["note~ACME"], {"note": "invoice for Acme Ltd"}, True),
    (["note~zzz"], {"note": "invoice"}, False),
    (["customer=acme", "amount>1"], {"customer": "acme", "amount": 2}, True),
    (["customer=acme", "amount>1"], {"customer": "acme", "amount": 1}, False),
])
def test_attributes_match_outside_sql_as_the_run_list_s_sql_decides(
        where: list[str], values: dict[str, Any], expected: bool) -> None:
    assert attributes.matches(attributes.parse_where(where, DECLARED), values) is expected


def archived_run(**run: Any) -> ArchivedRun:
    tenant_id, run_id, job_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    event = RunScheduled(job_id=job_id, scheduled_for=T0, task="report", pool="default",
                         priority="default", payload_ref=uuid.uuid4())
    return ArchivedRun(
        tenant_id=tenant_id, run_id=run_id, archived_at=T0 + timedelta(days=30),
        run={"id": str(run_id), "tenant_id": str(tenant_id), **run},
        events=[ArchivedEvent(seq=10, version=1, type="RunScheduled",
                              data=msgspec.to_builtins(event), actor="scheduler", epoch=3,
                              traceparent=None, occurred_at=T0, recorded_at=T0,
                              event_id=uuid.uuid4())],
        steps=[ArchivedStep(seq=1, name="b", succeeded=True, attempt=1, tries=1,
                            duration_ms=2.0, recorded_at=T0),
               ArchivedStep(seq=0, name="a", succeeded=False, attempt=1, tries=2,
                            duration_ms=1.0, recorded_at=T0, error_type="boom")])


def test_an_archived_run_s_events_and_steps_read_as_the_hot_side_s_rows() -> None:
    gone = archived_run()
    [event] = archived.recorded_events(gone)
    assert (event.stream_id, event.tenant_id, event.version, event.seq, event.epoch) == (
        gone.run_id, gone.tenant_id, 1, 10, 3)
    assert isinstance(event.event, RunScheduled) and event.event.task == "report"
    assert [s.name for s in archived.step_rows(gone)] == ["a", "b"]  # in position order


def test_a_runs_row_that_does_not_read_as_one_is_unreadable_not_a_500() -> None:
    with pytest.raises(ArchiveUnreadable) as caught:
        archived.run_row(archived_run(task=5))
    assert caught.value.status == 424 and "runs row" in caught.value.detail


class Holding:
    """An archive that holds exactly `runs` (no store behind it: the route's logic only)."""

    def __init__(self, *runs: tuple[uuid.UUID, uuid.UUID]) -> None:
        self.runs = set(runs)

    async def holds(self, tenant_id: uuid.UUID, run_id: uuid.UUID) -> bool:
        return (tenant_id, run_id) in self.runs


async def test_an_action_on_an_archived_run_is_a_409_and_on_an_unknown_one_the_404() -> None:
    tenant_id, kept, unknown = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()

    @archived.refuses_archived
    async def cancel(run_id: uuid.UUID, tenant: Any) -> str:
        raise NotFound(f"no run {run_id}")

    tenant = SimpleNamespace(tenant_id=tenant_id, archive=Holding((tenant_id, kept)))
    with pytest.raises(RunArchived) as caught:
        await cancel(run_id=kept, tenant=tenant)
    assert caught.value.status == 409 and caught.value.code == "run-archived"
    with pytest.raises(NotFound):
        await cancel(run_id=unknown, tenant=tenant)
    other = SimpleNamespace(tenant_id=uuid.uuid4(), archive=tenant.archive)
    with pytest.raises(NotFound):  # another tenant's archived run: the usual 404
        await cancel(run_id=kept, tenant=other)
