"""The pages moved from Python-built HTML to templates (issue 41): dead letters, DAGs, audit.
Each rendered with markup in every value a tenant controls (shown as text), its controls only
for a role that may use them, and what axe-core asks of it (a labelled textarea, a focusable
scrolling <pre>, no link inside an image). Pure: rendered to strings, no server."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from ostinato.dags import graph
from ostinato.stores.dead_letters import DeadLetterRow
from ostinato.stores.runs import StartLag
from ostinato.wire.api import DagNodeView, DagRunView, PoolView
from services.api.ui import audit, capacity, dags, html, render
from services.api.ui.render import Chrome

XSS = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
RUN = uuid.UUID("01900000-0000-7000-8000-0000004f2a9c")


def _page(template: str, **context: Any) -> str:
    return render.render_text(template, chrome=Chrome(csrf="t0k"), **context)


def _letter(**given: Any) -> DeadLetterRow:
    values: dict[str, Any] = dict(
        run_id=RUN, tenant_id=uuid.uuid4(), job_id=uuid.uuid4(), task=XSS, reason="exhausted",
        error_type=XSS, message=XSS, attempts=3, dead_lettered_at=AT, triage_state="new",
        triage_by=None, triage_comment=XSS, triaged_at=None, replays=0, last_replay_run=None,
        payload_ref=uuid.uuid4(), last_error=None)
    return DeadLetterRow(**{**values, **given})


def _letters(rows: list[DeadLetterRow], *, filtered: bool = False) -> str:
    return _page("dead_letters.html", rows=rows, bulk=html.Safe(""), total=len(rows),
                 by_type=[(XSS, len(rows))] if rows else [], triage=[("", "any")],
                 next_page=None, filtered=filtered, f={"error_type": XSS, "triage_state": ""})


def test_the_dead_letters_list_shows_every_value_as_text() -> None:
    page = _letters([_letter()])
    assert "<script>" not in page and page.count(ESCAPED) >= 4  # filter, counts, task, error
    assert f'href="/ui/dead-letters/{RUN}"' in page and "<code>…004f2a9c</code>" in page
    assert '<time datetime="2026-12-01T09:00:00+00:00"' in page  # the when macro


def test_an_empty_dead_letters_list_says_what_would_appear_and_how() -> None:
    none_yet = _letters([])
    assert "max_attempts" in none_yet and 'href="/ui/runs?state=failed"' in none_yet
    filtered = _letters([], filtered=True)
    assert "match this filter" in filtered and 'href="/ui/dead-letters">clear the filter' \
        in filtered


def _letter_page(operate: bool) -> str:
    return _page("dead_letter.html", row=_letter(last_replay_run=uuid.uuid4()), csrf="t0k",
                 operate=operate, triage=[("new", "new"), ("fixed", "fixed")], attempts=[],
                 request_key="k", payload='{"note": "' + XSS + '"}', job_name="nightly")


def test_a_dead_letters_replay_payload_is_text_in_a_labelled_textarea() -> None:
    page = _letter_page(operate=True)
    assert "<script>" not in page
    assert '<label for="payload">' in page and '<textarea name="payload" id="payload"' in page
    assert '<label for="edit-payload">' in page
    assert page.count('name="_csrf" value="t0k"') == 2  # triage and replay
    assert "Replay dead letter …" in page and " of job nightly: a new run of task " in page


def test_a_viewer_sees_a_dead_letter_with_no_form() -> None:
    page = _letter_page(operate=False)
    main = page.split("<main>", 1)[1]
    assert 'method="post"' not in main and "textarea" not in main


def test_a_json_block_can_be_scrolled_from_the_keyboard() -> None:
    assert '<pre tabindex="0">' in str(html.pre_json({"a": XSS}))


def _dag() -> graph.Dag:
    return graph.parse({"nodes": [{"key": "extract", "task": XSS}, {"key": "load", "task": "t"},
                                  {"key": "report", "task": "t"}],
                        "edges": [{"from": "extract", "to": "load"},
                                  {"from": "load", "to": "report"}]})


def _node(key: str, state: str, **given: Any) -> DagNodeView:
    return DagNodeView(key=key, task="t", state=state, trigger_rule="all_success",
                       parents=[], **given)


def test_a_dag_runs_graph_is_a_group_whose_nodes_link_their_runs() -> None:
    run = uuid.uuid4()
    svg = str(dags.graph_svg(_dag(), {"extract": _node("extract", "succeeded", run_id=run),
                                      "load": _node("load", "failed")}))
    assert 'role="group"' in svg and 'role="img"' not in svg  # an image holds no links
    assert svg.count("<a ") == 1 and f'href="/ui/runs/{run}"' in svg
    assert "<script>" not in svg and ESCAPED in svg
    x = {k: float(re.search(rf'data-key="{k}"[^>]*><rect x="(\d+)"', svg)[1])  # type: ignore
         for k in ("extract", "load", "report")}
    assert x["extract"] < x["load"] < x["report"]  # one column per layer


def _run_view(nodes: list[DagNodeView]) -> DagRunView:
    return DagRunView(id=RUN, dag_id=uuid.uuid4(), dag_version=2, state="failed",
                      trigger=XSS, due_at=AT, cancel_requested=False, created_at=AT,
                      started_at=AT, finished_at=None, nodes=nodes,
                      progress={"total": 2, "succeeded": 1, "failed": 1})


def test_a_dag_runs_nodes_show_their_times_and_error_in_few_columns() -> None:
    failed = _node("load", "failed", ready_at=AT, started_at=AT, last_error={
        "type": "bad_input", "message": XSS + "x" * 200})
    view = _run_view([_node("extract", "succeeded"), failed])
    page = _page("dag_run_body.html", view=view, dag={"id": view.dag_id, "name": XSS},
                 progress={"total": 2, "ended": 2, "counts": [("failed", 1)]},
                 graph=html.Safe(""), csrf="t0k", retryable=("failed",), operate=True)
    assert "<script>" not in page
    table = page.split('<table class="dag-nodes">', 1)[1]
    assert table.split("</tr>", 1)[0].count("<th ") == 9  # a 1,440 px screen holds them
    assert "<span class=\"muted\">ready</span>" in table and "started</span>" in table
    assert 'title="' + ESCAPED in table  # the long error clipped, whole on hover
    assert table.count("<summary>Retry from here…</summary>") == 1  # the failed node only
    assert "Retry DAG run " in table and " from node " in table  # its confirmation
    viewer = _page("dag_run_body.html", view=view, dag={"id": view.dag_id, "name": "d"},
                   progress={"total": 2, "ended": 2, "counts": []}, graph=html.Safe(""),
                   csrf="t0k", retryable=("failed",), operate=False)
    assert "Retry from here" not in viewer and 'method="post"' not in viewer


def test_no_dags_yet_says_what_a_dag_is_and_where_to_define_one() -> None:
    page = _page("dags.html", rows=[], may_define=True, next_page=None)
    assert "docs/DAGS.md" in page and 'href="/ui/dags/new">Define a DAG</a> here' in page
    viewer = _page("dags.html", rows=[], may_define=False, next_page=None)
    assert "/ui/dags/new" not in viewer


def test_an_audit_change_names_only_the_fields_that_differ() -> None:
    assert audit.changed_fields({"a": 1, "b": XSS}, {"a": 2, "b": XSS, "c": None}) == [
        ("a", "1", "2")]
    assert audit.changed_fields(None, {"reason": "x"}) == [("reason", None, '"x"')]
    assert audit.changed_fields([1], [2]) == [("value", "[\n  1\n]", "[\n  2\n]")]
    assert audit.changed_fields(None, None) == []


def test_the_start_lag_chart_draws_each_minute_of_each_class_with_its_figures() -> None:
    start = capacity.lag_window(AT)
    points = [StartLag(pool="default", priority=XSS, minute=start + timedelta(minutes=m),
                       runs=m + 1, p50=0.5 * m, p99=1.5 * m) for m in (3, 10)]
    chart = capacity.lag_chart(points, ["default", XSS], start)
    view = PoolView(name="default", paused=False, queue_paused=False, shared_slots=2,
                    own_slots=1, classes={})
    page = _page("pools.html", sections=[{"view": view, "slots": 3, "rows": [], "chart": chart}],
                 csrf="t0k", operate=False, minutes=capacity.LAG_MINUTES, pools=[("", "every")],
                 f={"pool": "", "priority": ""}, classes=[("", "every class")])
    assert "<script>" not in page and 'data-class="' + ESCAPED in page
    dots = re.findall(r'<circle class="lag-point c1" cx="([\d.]+)"[^>]*data-runs="(\d+)"', page)
    assert [runs for _, runs in dots] == ["4", "11"] and float(dots[0][0]) < float(dots[1][0])
    assert page.count("<polyline") == 2 and "Pause my queue" not in page  # a viewer's
    assert capacity.lag_chart([], ["default"], start) is None
