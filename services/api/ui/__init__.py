"""The web UI, served by the api process under /ui: server-rendered pages (the overview, runs,
run detail, jobs and schedules, DAGs and DAG runs, dead letters, bulk operations, pools,
workers, the tenant's keys, the audit trail; the admin's tenants), one CSS and one JS file from
`static/`, logins with an API key (docs/UI.md)."""

from __future__ import annotations

from pathlib import Path

from litestar import Router
from litestar.datastructures import CacheControlHeader
from litestar.di import Provide
from litestar.static_files import create_static_files_router

from services.api.ui import (
    audit,
    capacity,
    dag_define,
    dags,
    holds,
    jobs,
    keys,
    letters,
    limits,
    login,
    operations,
    overview,
    run_actions,
    run_page,
    runs,
    tenants,
)
from services.api.ui.scope import EXCEPTION_HANDLERS, SECURITY_HEADERS, ui_scope, with_ui_pages
from services.api.ui.sessions import Sessions

STATIC_DIR = Path(__file__).resolve().parent / "static"


def routes(sessions: Sessions | None = None) -> list[Router]:
    """The UI's routers for one app; its sessions live in PostgreSQL, shared by every api
    instance (`sessions`: their expiry rules)."""
    store = sessions or Sessions()
    pages = Router(
        path="/ui",
        route_handlers=[*login.ROUTES, *overview.ROUTES, *runs.ROUTES, *run_page.ROUTES,
                        *run_actions.ROUTES,
                        *jobs.ROUTES, *dag_define.ROUTES, *dags.ROUTES, *letters.ROUTES,
                        *operations.ROUTES, *capacity.ROUTES, *limits.ROUTES, *keys.ROUTES,
                        *audit.ROUTES, *tenants.ROUTES, *holds.ROUTES],
        dependencies={"sessions": Provide(lambda: store, use_cache=True, sync_to_thread=False),
                      "ui": Provide(ui_scope)},
        exception_handlers=EXCEPTION_HANDLERS,
        include_in_schema=False,
    )
    static = create_static_files_router(
        "/ui/static", [STATIC_DIR], name="ui-static", include_in_schema=False,
        cache_control=CacheControlHeader(no_cache=True))
    return [pages, static]


__all__ = ["SECURITY_HEADERS", "routes", "with_ui_pages"]
