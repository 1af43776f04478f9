"""What the api refuses while the database's storage is full (services/api/storage.py,
docs/RETENTION.md "The disk"), decided by a route's audited action: every action named is one
some route has (a renamed action would silently stop being refused), the routes that make new
work are all named, and those that let work in flight finish are not. A Kafka submission
met while full is left pending (retried, never rejected, never given up). No servers."""

from __future__ import annotations

from collections.abc import Iterator

from litestar.handlers import HTTPRouteHandler

from ostinato.domain.errors import StorageFull
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from services.api.app import create_app
from services.api.auditing import AuditSpec
from services.api.ingest import problem_of
from services.api.storage import NEW_WORK
from tests.helpers.integration import store


def handlers() -> Iterator[tuple[str, str, AuditSpec | None]]:
    """(method, path, audit spec) of every route of the api."""
    app = create_app(Service("api", Settings()), store())
    for route in app.routes:
        for handler in getattr(route, "route_handlers", ()):
            if isinstance(handler, HTTPRouteHandler):
                for method in sorted(handler.http_methods):
                    yield method, route.path, handler.opt.get("audit")


def test_every_new_work_action_is_a_routes_and_the_routes_that_make_work_are_refused() -> None:
    by_action: dict[str, set[tuple[str, str]]] = {}
    for method, path, spec in handlers():
        if spec is not None:
            by_action.setdefault(spec.action, set()).add((method, path))
    assert NEW_WORK <= set(by_action), NEW_WORK - set(by_action)
    refused = {route for action in NEW_WORK for route in by_action[action]}
    for route in [("POST", "/v1/jobs"), ("POST", "/v1/jobs/batch"),
                  ("POST", "/v1/jobs/{job_id:uuid}/trigger"),
                  ("POST", "/v1/jobs/{job_id:uuid}/backfill"),
                  ("POST", "/v1/dags/{dag_id:uuid}/runs"),
                  ("POST", "/v1/runs/{run_id:uuid}/retry"),
                  ("POST", "/v1/dead-letters/{run_id:uuid}/replay"),
                  ("POST", "/v1/workflows/{task:str}/{workflow_id:str}/start"),
                  ("POST", "/v1/workflows/{task:str}/{workflow_id:str}/signal-with-start"),
                  ("POST", "/ui/jobs/{job_id:uuid}/trigger")]:
        assert route in refused, route


def test_what_lets_work_in_flight_finish_is_never_refused() -> None:
    for action in ("run.cancel", "dag_run.cancel", "job.pause", "job.resume", "job.delete",
                   "run.signal", "run.update", "run.pause", "run.resume", "dead_letter.triage",
                   "tenant.create", "key.issue", "alert_sink.put", "operation.cancel"):
        assert action not in NEW_WORK


def test_a_submission_met_while_full_is_left_pending_never_rejected() -> None:
    assert problem_of(StorageFull("full", retry_after_seconds=60)) is None


def test_storage_full_is_a_503_problem_of_its_own_type() -> None:
    e = StorageFull("full", retry_after_seconds=60)
    assert (e.status, e.problem_type) == (503, "https://ostinato.dev/problems/storage-full")
    assert e.extra == {"retry_after_seconds": 60}
