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
from services.api.ui import html
from services.api.ui.html import Safe, badge, fmt, join, when
from services.api.ui.scope import Ui, UiScope, checked_form, redirect


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


def lag_chart(points: Sequence[StartLag], classes: Sequence[str], start: datetime) -> Safe:
    """Start lag p50 (solid) and p99 (dashed) per class and minute as inline SVG, from
    `start` over LAG_MINUTES minutes; each minute a dot holding its figures."""
    if not points:
        return fmt('<p class="empty lag-empty">No run of yours started in the last {m} '
                   'minutes.</p>', m=LAG_MINUTES)
    top = _ceiling(max(p.p99 for p in points))
    span = LAG_MINUTES * 60.0
    width, height = CHART_W - LEFT - RIGHT, CHART_H - TOP - BOTTOM

    def x(at: datetime) -> float:
        return LEFT + min(max((at - start).total_seconds() / span, 0.0), 1.0) * width

    def y(v: float) -> float:
        return TOP + (1 - min(v / top, 1.0)) * height

    grid = []
    for v in (0.0, top / 2, top):
        grid.append(fmt('<line class="grid" x1="{a}" x2="{b}" y1="{y}" y2="{y}"></line>'
                        '<text class="axis" x="{t}" y="{ty}" text-anchor="end">{v}</text>',
                        a=LEFT, b=LEFT + width, y=f"{y(v):.1f}", t=LEFT - 6,
                        ty=f"{y(v) + 4:.1f}", v=_age(v)))
    for i, anchor in ((0, "start"), (LAG_MINUTES // 2, "middle"), (LAG_MINUTES, "end")):
        at = start + timedelta(minutes=i)
        grid.append(fmt('<text class="axis" x="{x}" y="{y}" text-anchor="{a}">{t}</text>',
                        x=f"{x(at):.1f}", y=CHART_H - 6, a=anchor, t=at.strftime("%H:%M UTC")))
    series, legend = [], []
    for i, name in enumerate(classes):
        mine = [p for p in points if p.priority == name]
        if not mine:
            continue
        colour = f"c{i % COLOURS}"
        for q in ("p50", "p99"):
            series.append(fmt(
                '<polyline class="lag {c} {q}" data-class="{name}" data-q="{q}" '
                'points="{pts}"></polyline>', c=colour, q=q, name=name,
                pts=" ".join(f"{x(p.minute):.1f},{y(getattr(p, q)):.1f}" for p in mine)))
        series.extend(fmt(
            '<circle class="lag-point {c}" cx="{x}" cy="{y}" r="3" data-class="{name}" '
            'data-minute="{m}" data-runs="{n}" data-p50="{p50}" data-p99="{p99}"><title>'
            '{name} {t}: {n} runs, p50 {a}, p99 {b}</title></circle>', c=colour,
            x=f"{x(p.minute):.1f}", y=f"{y(p.p99):.1f}", name=name, m=p.minute.isoformat(),
            n=p.runs, p50=f"{p.p50:.6f}", p99=f"{p.p99:.6f}", t=p.minute.strftime("%H:%M"),
            a=_age(p.p50), b=_age(p.p99)) for p in mine)
        legend.append(fmt('<span class="swatch {c}"></span> {name}', c=colour, name=name))
    return fmt(
        '<figure class="lag-chart"><svg xmlns="http://www.w3.org/2000/svg" role="img" '
        'aria-label="start lag per class" width="{w}" height="{h}" viewBox="0 0 {w} {h}">'
        '{grid}{series}</svg><figcaption>{legend} · p50 solid, p99 dashed; the lag from '
        'due to started of your runs started in their first attempt, per minute of their '
        'slot</figcaption></figure>', w=CHART_W, h=CHART_H, grid=join(grid),
        series=join(series), legend=join(legend, " "))


def _pools(ui: UiScope, chosen: str | None) -> list[tuple[str, str]]:
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
    operate = roles.may(ui.session.role, roles.OPERATE)
    sections = []
    for v in views:
        if pool and v.name != pool:
            continue
        slots = v.shared_slots + v.own_slots
        status = badge("paused") if v.paused else badge("active")
        queue = fmt(" your queue: {b}", b=badge("paused")) if v.queue_paused else Safe("")
        action = Safe("")
        if operate:
            verb = "resume" if v.queue_paused else "pause"
            action = html.post_button(f"/ui/pools/{v.name}/{verb}",
                                      "Resume my queue" if v.queue_paused else "Pause my queue",
                                      ui.csrf)
        rows = []
        share = fairness.shares(slots, classes)  # the dispatcher's own rounding
        for c in classes:
            if priority and c.name != priority:
                continue
            load = v.classes.get(c.name)
            rows.append([c.name, f"{c.reserved_share:.0%}", share[c.name].reserved,
                         f"{c.lendable_fraction:.0%}", load.waiting if load else 0,
                         _age(load.oldest_waiting_seconds if load else None),
                         load.in_flight if load else 0])
        sections.append(fmt(
            '<section class="pool" data-pool="{name}"><h2>Pool {name} {status}{queue}</h2>'
            '<p>{slots} live slots: {shared} shared, {own} of your own workers. {action}</p>'
            '{table}<h3>Start lag, the last {m} minutes</h3>{chart}</section>',
            name=v.name, status=status, queue=queue, slots=slots, shared=v.shared_slots,
            own=v.own_slots, action=action, table=html.table(
                ["class", "reserved share", "reserved slots", "lendable", "waiting (yours)",
                 "oldest waiting", "in flight (yours)"], rows, "No class.", "classes"),
            m=LAG_MINUTES, chart=lag_chart(
                [p for p in lags if p.pool == v.name and (not priority or p.priority == priority)],
                [c.name for c in classes], start)))
    form = fmt('<form method="get" action="/ui/pools" class="filters"><label>pool {p}</label>'
               '<label>class {c}</label><button type="submit">Filter</button> '
               '<a href="/ui/pools">clear</a></form>',
               p=html.select("pool", _pools(ui, pool), pool),
               c=html.select("priority", [("", "every class"),
                                          *((c.name, c.name) for c in classes)], priority))
    note = Safe('<p class="muted">Fair dispatch (docs/FAIRNESS.md): each class keeps its reserved '
                'share of a pool\'s live slots and may lend the lendable part of it while it '
                'does not need it; within a class, tenants share by weight. Waiting and in '
                'flight count this tenant\'s runs. <a href="/ui/limits">Task and resource '
                'limits</a></p>')
    return ui.page("Pools & fairness", join([form, note, *sections]), "pools")


async def _pause(request: Request, ui: UiScope, pool: str, paused: bool) -> Any:
    await checked_form(request, ui)
    if pool not in ui.settings.pool_names:
        raise NotFound(f"no pool {pool!r}")
    changed = await controls.set_paused(ui.conn, ui.store, pool=pool, tenant_id=ui.tenant_id,
                                        paused=paused, reason="web UI" if paused else None,
                                        actor=ui.actor)
    word = "paused" if paused else "resumed"
    ui.session.flash = (f"Your queue in pool {pool} is {word}." if changed
                        else f"Your queue in pool {pool} was already {word}.")
    return redirect(html.url("/ui/pools"))


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
    rows = []
    for w in workers:
        is_live = now - w.seen_at <= ttl
        if pool and pool not in w.pools:
            continue
        if task and task not in (w.versions or {}):
            continue
        if live and not is_live:
            continue
        rows.append([fmt("<code>{w}</code>", w=w.worker_id), "shared" if w.tenant_id is None
                     else "this tenant", ", ".join(w.pools), w.slots,
                     badge("active") if is_live else badge("off"), when(w.seen_at),
                     ", ".join(f"{k} {v}" for k, v in sorted((w.versions or {}).items()))
                     or Safe('<span class="muted">—</span>')])
    form = fmt(
        '<form method="get" action="/ui/workers" class="filters"><label>pool {p}</label>'
        '<label>serves task <input name="task" value="{task}" size="14"></label>'
        '<label class="check"><span>live only</span><input type="checkbox" name="live" '
        'value="1"{checked}></label><button type="submit">Filter</button> '
        '<a href="/ui/workers">clear</a></form>',
        p=html.select("pool", _pools(ui, pool), pool), task=task,
        checked=Safe(" checked") if live else Safe(""))
    note = fmt('<p class="muted">Workers seen within {ttl} s are live: their slots are pool '
               'capacity. Shared workers (the admin key\'s) serve every tenant.</p>',
               ttl=f"{ui.settings.worker_ttl_seconds:g}")
    return ui.page("Workers", join([form, note, html.table(
        ["worker", "scope", "pools", "slots", "live", "last seen", "task versions"], rows,
        "No workers match.", "workers")]), "workers")


ROUTES = [pools_page, pause_pool, resume_pool, workers_page]
