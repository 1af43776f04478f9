"""The web UI's templates (issue 41): one engine that escapes every value, the base layout
around every page (those still built in Python too), and the macros' escaping. Pure: rendered
to strings, no server."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import jinja2
import msgspec
import pytest
from litestar import Request

from ostinato.domain import roles
from ostinato.stores import jobs as job_store
from ostinato.stores.runs import RunRow
from services.api.ui import html, jobs, render, runs, scope

XSS = "<script>alert(1)</script>"
PAGE = render.ENV.from_string(  # the base layout around a body, as every page extends it
    '{% extends "base.html" %}{% block title %}{{ title }}{% endblock %}'
    '{% block content %}{{ body }}{% endblock %}')
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def _page(title: str, body: html.Safe, *, section: str = "", tenant: str | None = None,
          csrf: str | None = None, flash: str | None = None, role: str | None = None,
          acting: bool = False) -> str:
    return PAGE.render(title=title, body=body, chrome=render.chrome(
        section=section, tenant=tenant, csrf=csrf, flash=flash, role=role, acting=acting))


def test_every_template_escapes_and_refuses_unknown_names() -> None:
    assert render.ENV.autoescape is True  # every template, whatever its file name
    assert render.ENV.undefined is jinja2.StrictUndefined
    tpl = render.ENV.from_string("{{ value }}")
    assert tpl.render(value=XSS) == ESCAPED
    with pytest.raises(jinja2.UndefinedError):
        tpl.render()


def test_markup_in_a_title_flash_tenant_or_body_value_is_text() -> None:
    body = html.fmt("<p>{v}</p>", v=XSS)
    page = _page(XSS, body, section="runs", tenant=XSS, csrf="t0k", flash=XSS,
                     role=roles.OPERATOR)
    assert "<script>" not in page
    assert page.count(ESCAPED) == 5  # <title>, <h1>, the tenant, the flash, the body
    assert f"<p>{ESCAPED}</p>" in page  # the body's own markup kept, its value escaped once


def test_the_base_layout_holds_the_chrome_and_only_the_one_script_and_stylesheet() -> None:
    page = _page("Runs", html.Safe("<p>x</p>"), section="runs", tenant="acme", csrf="t0k",
                     role=roles.OPERATOR)
    assert '<meta name="csrf-token" content="t0k">' in page
    assert '<a href="/ui/runs" class="here">Runs</a>' in page
    assert '<a href="/ui/tenants"' not in page  # an operator is offered no tenants page
    assert '<input type="hidden" name="_csrf" value="t0k">' in page  # the logout form
    assert page.count("<script") == 1 and '<script src="/ui/static/ui.js" defer></script>' in page
    assert page.count("<link rel=\"stylesheet\"") == 1
    assert "style=" not in page and "<style" not in page  # CSP: style-src 'self'
    assert "<title>Runs · Ostinato</title>" in page and "<h1>Runs</h1>" in page


def test_a_viewer_is_offered_no_keys_and_no_session_has_no_navigation() -> None:
    viewer = _page("Runs", html.Safe(""), tenant="acme", csrf="t", role=roles.VIEWER)
    assert '<a href="/ui/runs"' in viewer and '<a href="/ui/keys"' not in viewer
    anonymous = _page("Log in", html.Safe(""))
    assert "<nav>" not in anonymous and "csrf-token" not in anonymous


def test_an_admin_acting_for_a_tenant_is_told_so() -> None:
    page = _page("Runs", html.Safe(""), tenant="acme", csrf="t", role=roles.ADMIN,
                     acting=True)
    assert "admin for tenant <b>acme</b>" in page
    assert 'action="/ui/tenants/stop-acting"' in page


def test_the_id_macro_escapes_and_keeps_the_part_that_differs() -> None:
    a = uuid.UUID("01a24963-0000-7000-8000-00004f2a9c1b")
    b = uuid.UUID("01a24963-0000-7000-8000-0000deadbeef")  # made in the same minute
    shown_a, shown_b = str(html.ident(a)), str(html.ident(b))
    assert "…4f2a9c1b" in shown_a and "…deadbeef" in shown_b
    assert f'title="{a}"' in shown_a and f'data-copy="{a}"' in shown_a  # full id kept
    named = str(html.ident(a, href=f"/ui/jobs/{a}", label=XSS))
    assert ESCAPED in named and "<script>" not in named and f'href="/ui/jobs/{a}"' in named
    assert "<script>" not in str(html.ident(XSS))  # not a UUID: whole, as text
    assert ESCAPED in str(html.ident(XSS))


def test_the_when_macro_gives_the_instant_in_utc_for_the_script() -> None:
    at = datetime(2026, 12, 6, 23, 40, 5, tzinfo=UTC)
    shown = str(render.macro("when", at))
    assert '<time datetime="2026-12-06T23:40:05+00:00"' in shown
    assert ">2026-12-06 23:40:05 UTC</time>" in shown  # the fallback without script
    assert "—" in str(render.macro("when", None))


def test_a_safe_body_built_in_python_is_not_escaped_twice_in_a_template() -> None:
    tpl = render.ENV.from_string("<div>{{ body }}</div>")
    assert tpl.render(body=html.fmt("<b>{v}</b>", v="a&b")) == "<div><b>a&amp;b</b></div>"


def test_no_template_holds_inline_script_or_style() -> None:
    for path in Path(render.TEMPLATES).rglob("*.html"):
        text = path.read_text()
        assert "<script>" not in text and "<style" not in text and " style=" not in text, path
        assert " on" + "click=" not in text, path


# -- the runs and jobs lists (issue 41 items 1, 3, 4) ---------------------------------------------

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _run(**given: Any) -> RunRow:
    """A runs row with only what a list row reads set (the rest None: a struct checks no types
    when built)."""
    blank = RunRow(*([None] * len(msgspec.structs.fields(RunRow))))
    return msgspec.structs.replace(blank, **{
        "id": uuid.uuid4(), "job_id": uuid.uuid4(), "task": "billing", "pool": "default",
        "priority": "normal", "state": "succeeded", "failures": 0, "retry_policy": None,
        "paused": False, "scheduled_for": T0, "last_error": None, **given})


def test_a_run_line_shows_its_jobs_name_duration_and_a_failures_error() -> None:
    job = uuid.uuid4()
    ended = runs.run_line(_run(job_id=job, started_at=T0, finished_at=T0 + timedelta(seconds=3)),
                          {job: "nightly"}, T0 + timedelta(hours=1))
    assert (ended.job_name, ended.seconds, ended.running, ended.error_type) == \
        ("nightly", 3.0, False, None)
    under_way = runs.run_line(_run(state="running", started_at=T0), {}, T0 + timedelta(minutes=2))
    assert (under_way.job_name, under_way.seconds, under_way.running) == (None, 120.0, True)
    failed = runs.run_line(_run(state="dead_lettered", started_at=T0, finished_at=T0,
                                last_error={"type": "bad_input", "message": XSS}), {}, T0)
    assert (failed.error_type, failed.error_message, failed.seconds) == ("bad_input", XSS, 0.0)
    # a succeeded run keeps the error of an earlier attempt in last_error: not shown as failed
    retried = runs.run_line(_run(last_error={"type": "flaky", "message": "once"}), {}, T0)
    assert retried.error_type is None and runs.run_line(_run(), {}, T0).seconds is None


def test_the_runs_table_shows_every_value_as_text() -> None:
    a = uuid.UUID("01a24963-0000-7000-8000-00004f2a9c1b")
    line = runs.run_line(_run(id=a, state="failed", started_at=T0, finished_at=T0,
                              last_error={"type": XSS, "message": XSS * 10}, task=XSS),
                         {}, T0)
    page = render.render_text("runs_table.html", lines=[line], empty="none", sort=None, pager=[])
    assert "<script>" not in page and ESCAPED in page
    assert "…4f2a9c1b" in page and 'class="clip"' in page  # the long message cut, whole on hover
    assert render.render_text("runs_table.html", lines=[], empty=XSS, sort=None, pager=[]) \
        .strip() == f'<p class="empty">{ESCAPED}</p>'


def test_the_durations_read_as_an_operator_says_them() -> None:
    said = [render.duration_text(s) for s in (0.4121, 3.44, 42, 125, 3600, 11520, 90000, None)]
    assert said == ["412 ms", "3.4 s", "42 s", "2 min 5 s", "1 h", "3 h 12 min", "1 d 1 h", ""]


def test_two_ids_of_one_minute_never_look_alike_as_text_either() -> None:
    a, b = "01a24963-0000-7000-8000-00004f2a9c1b", "01a24963-0000-7000-8000-0000deadbeef"
    assert html.short(a) == "…4f2a9c1b" != html.short(b)
    assert render.id_tail("not-a-uuid") == "not-a-uuid"


def _job_line(**given: Any) -> jobs.JobLine:
    values: dict[str, Any] = {
        "id": uuid.uuid4(), "name": "nightly-report", "task": "report", "pool": "default",
        "priority": "normal", "status": "active", "schedule": "every day at 02:30 Europe/Berlin",
        "schedule_raw": "cron 30 2 * * * (Europe/Berlin)", "next_run_at": T0,
        "last_run_at": None, "runs": 0, "pause": None, "outcome": None}
    return jobs.JobLine(**{**values, **given})


def _jobs_page(*lines: jobs.JobLine) -> str:
    return render.render_text("jobs.html", lines=list(lines), statuses=jobs.STATUSES, chosen="",
                              bulk=html.Safe(""), pager=[], operate=False, create=False,
                              misfires=[], csrf="t")


def test_a_paused_job_shows_why_and_no_next_run() -> None:
    job = uuid.uuid4()
    paused = _job_line(id=job, status="paused", pause=job_store.PauseReason(
        job_id=job, reason=XSS, auto=False, actor="tenant:acme", paused_at=T0))
    page = _jobs_page(paused)
    assert "<script>" not in page and ESCAPED in page and "by tenant:acme" in page
    next_cell = page.split('<tr data-status="paused">')[1].split("<td>")[5]
    assert "none while paused" in next_cell and "<time" not in next_cell
    active = _jobs_page(_job_line())
    assert '<time datetime="2026-12-06T12:00:00+00:00"' in active
    assert 'title="cron 30 2 * * * (Europe/Berlin)">every day at 02:30 Europe/Berlin' in active


def test_a_jobs_last_outcome_links_its_run() -> None:
    run = uuid.uuid4()
    page = _jobs_page(_job_line(outcome=job_store.LastOutcome(
        job_id=uuid.uuid4(), run_id=run, state="dead_lettered", finished_at=T0,
        error_type="bad_input")))
    assert f'href="/ui/runs/{run}"' in page and '<span class="badge bad">dead_lettered' in page
    assert '<span class="error-type">bad_input</span>' in page


def _request(path: str = "/ui/runs", query: bytes = b"",
             method: str = "GET") -> Request[Any, Any, Any]:
    return Request({"type": "http", "method": method, "path": path, "raw_path": path.encode(),
                    "query_string": query, "headers": [], "scheme": "http",
                    "server": ("api.test", 80), "root_path": ""})


def test_an_unexpected_error_is_a_page_that_tells_nothing_of_it() -> None:
    answer = scope.on_unexpected(_request(), RuntimeError(f"secret {XSS}"))
    page = answer.content
    assert answer.status_code == 500 and answer.media_type == "text/html"
    assert "secret" not in page and "alert(1)" not in page
    assert "<h1>Something went wrong</h1>" in page and 'href="/ui/runs"' in page
    assert answer.headers["Content-Security-Policy"] == render.SECURITY_HEADERS[
        "Content-Security-Policy"]


def test_an_unavailable_database_is_a_503_page_to_try_again() -> None:
    answer = scope.on_unexpected(_request(query=b"state=failed"),
                                 asyncpg.CannotConnectNowError("starting up"))
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"
    assert '<a href="/ui/runs?state=failed">Try again</a>' in answer.content
    posted = scope.on_unexpected(_request("/ui/runs/x/cancel", method="POST"),
                                 asyncpg.CannotConnectNowError("starting up"))
    assert ">Try again</a>" not in posted.content  # a form is not sent again by a link
