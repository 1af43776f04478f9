"""The pools and fairness page and the workers page: what GET /v1/pools and GET /v1/workers
show, for the signed-in tenant. Per pool: live slots (shared workers' and the tenant's own), the
priority classes' reserved shares of them, and the tenant's queue per class (waiting runs, the
oldest's wait, runs in flight) and a start-lag chart (p50/p99 per class and minute, inline
SVG); pausing the tenant's own queue in a pool (operators)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery

from ostinato import dispatch_controls as controls
from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.policy import fairness
from ostinato.stores import runs as run_store
from ostinato.stores.runs import StartLag
from ostinato.workers import registry
from services.api.auditing import audited
from services.api.capacity import pool_views
from services.api.ui import actions
from services.api.ui.render import url
from services.api.ui.scope import Ui, UiScope, redirect


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


LAG_MINUTES = 30  # the start-lag chart's window
CHART_W, CHART_H, LEFT, RIGHT, TOP, BOTTOM = 640, 190, 52, 12, 10, 24  # SVG user units
COLOURS = 4  # class colours in ui.css (.c0 .. .c3), reused beyond


def lag_window(now: datetime) -> datetime:
    """The chart's first minute: LAG_MINUTES whole minutes before `now`'s."""
    return now.replace(second=0, microsecond=0) - timedelta(minutes=LAG_MINUTES)


def _ceiling(seconds: float) -> float:
    """A round top for the y axis at or above `seconds` (1, 2 or 5 times a power of ten)."""
    step = 0.01
    while True:
        for m in (1, 2, 5):
            if seconds <= step * m:
                return step * m
        step *= 10


def lag_chart(points: Sequence[StartLag], classes: Sequence[str],
              start: datetime) -> dict[str, Any] | None:
    """Start lag p50 (solid) and p99 (dashed) per class and minute, from `start` over
    LAG_MINUTES minutes, as the geometry pools.html draws (inline SVG), each minute a dot
    holding its figures; None when no run started then."""
    if not points:
        return None
    top = _ceiling(max(p.p99 for p in points))
    span = LAG_MINUTES * 60.0
    width, height = CHART_W - LEFT - RIGHT, CHART_H - TOP - BOTTOM

    def x(at: datetime) -> str:
        return f"{LEFT + min(max((at - start).total_seconds() / span, 0.0), 1.0) * width:.1f}"

    def y(v: float) -> float:
        return TOP + (1 - min(v / top, 1.0)) * height

    grid = [{"y": f"{y(v):.1f}", "ty": f"{y(v) + 4:.1f}", "label": _age(v)}
            for v in (0.0, top / 2, top)]
    ticks = [{"x": x(start + timedelta(minutes=i)), "anchor": anchor,
              "label": (start + timedelta(minutes=i)).strftime("%H:%M UTC")}
             for i, anchor in ((0, "start"), (LAG_MINUTES // 2, "middle"),
                               (LAG_MINUTES, "end"))]
    series = []
    for i, name in enumerate(classes):
        mine = [p for p in points if p.priority == name]
        if not mine:
            continue
        series.append({
            "name": name, "colour": f"c{i % COLOURS}",
            "lines": [(q, " ".join(f"{x(p.minute)},{y(getattr(p, q)):.1f}" for p in mine))
                      for q in ("p50", "p99")],
            "dots": [{"x": x(p.minute), "y": f"{y(p.p99):.1f}", "minute": p.minute.isoformat(),
                      "runs": p.runs, "p50": f"{p.p50:.6f}", "p99": f"{p.p99:.6f}",
                      "hhmm": p.minute.strftime("%H:%M"), "p50_text": _age(p.p50),
                      "p99_text": _age(p.p99)} for p in mine]})
    return {"w": CHART_W, "h": CHART_H, "left": LEFT, "right": LEFT + width, "grid": grid,
            "ticks": ticks, "series": series}


def _pools(ui: UiScope) -> list[tuple[str, str]]:
    return [("", "every pool"), *((p, p) for p in ui.settings.pool_names)]


@get("/pools", include_in_schema=False)
async def pools_page(request: Request, ui: Ui, pool: FromQuery[str | None] = None,
                     priority: FromQuery[str | None] = None) -> Response[str]:
    if pool and pool not in ui.settings.pool_names:
        raise InvalidInput(f"unknown pool {pool!r}", errors=[{"field": "pool",
                                                             "message": "unknown"}])
    classes = ui.settings.classes
    if priority and priority not in {c.name for c in classes}:
        raise InvalidInput(f"unknown class {priority!r}", errors=[{"field": "priority",
                                                                  "message": "unknown"}])
    views = await pool_views(ui.conn, request.app.state, ui.tenant_id)
    start = lag_window(ui.clock.now())
    lags = await run_store.start_lag(ui.conn, ui.tenant_id, start)
    sections = []
    for v in views:
        if pool and v.name != pool:
            continue
        slots = v.shared_slots + v.own_slots
        share = fairness.shares(slots, classes)  # the dispatcher's own rounding
        rows = []
        for c in classes:
            if priority and c.name != priority:
                continue
            load = v.classes.get(c.name)
            rows.append([c.name, f"{c.reserved_share:.0%}", share[c.name].reserved,
                         f"{c.lendable_fraction:.0%}", load.waiting if load else 0,
                         _age(load.oldest_waiting_seconds if load else None),
                         load.in_flight if load else 0])
        sections.append({"view": v, "slots": slots, "rows": rows, "chart": lag_chart(
            [p for p in lags if p.pool == v.name and (not priority or p.priority == priority)],
            [c.name for c in classes], start)})
    return ui.render("pools.html", section="pools", sections=sections, csrf=ui.csrf,
                     operate=roles.may(ui.session.role, roles.OPERATE), minutes=LAG_MINUTES,
                     pools=_pools(ui), f={"pool": pool, "priority": priority},
                     classes=[("", "every class"), *((c.name, c.name) for c in classes)])


async def _pause(request: Request, ui: UiScope, pool: str, paused: bool) -> Any:
    sent = await actions.posted(request, ui)
    if pool not in ui.settings.pool_names:
        raise NotFound(f"no pool {pool!r}")
    changed = await controls.set_paused(ui.conn, ui.store, pool=pool, tenant_id=ui.tenant_id,
                                        paused=paused,
                                        reason=(sent.reason or "web UI") if paused else None,
                                        actor=ui.actor)
    word = "paused" if paused else "resumed"
    actions.done(ui, f"Your queue in pool {pool} is {word}." if changed
                 else f"Your queue in pool {pool} was already {word}: nothing changed.")
    return redirect(url("/ui/pools"))


@post("/pools/{pool:str}/pause", include_in_schema=False,
      opt=audited("pool.pause", "pool", "pool"))
async def pause_pool(request: Request, pool: FromPath[str], ui: Ui) -> Response[Any]:
    return await _pause(request, ui, pool, True)


@post("/pools/{pool:str}/resume", include_in_schema=False,
      opt=audited("pool.resume", "pool", "pool"))
async def resume_pool(request: Request, pool: FromPath[str], ui: Ui) -> Response[Any]:
    return await _pause(request, ui, pool, False)


@get("/workers", include_in_schema=False)
async def workers_page(ui: Ui, pool: FromQuery[str | None] = None,
                       task: FromQuery[str | None] = None,
                       live: FromQuery[str | None] = None) -> Response[str]:
    workers = await registry.list_workers(ui.conn, ui.tenant_id)
    now = ui.clock.now()
    ttl = timedelta(seconds=ui.settings.worker_ttl_seconds)
    lines = []
    for w in workers:
        is_live = now - w.seen_at <= ttl
        if (pool and pool not in w.pools) or (task and task not in (w.versions or {})) \
                or (live and not is_live):
            continue
        lines.append({"row": w, "live": is_live, "versions": ", ".join(
            f"{k} {v}" for k, v in sorted((w.versions or {}).items()))})
    return ui.render("workers.html", section="workers", lines=lines, pools=_pools(ui),
                     f={"pool": pool, "task": task, "live": live},
                     filtered=bool(pool or task or live),
                     ttl=f"{ui.settings.worker_ttl_seconds:g}")


ROUTES = [pools_page, pause_pool, resume_pool, workers_page]
