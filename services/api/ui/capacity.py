"""The pools and fairness page and the workers page: what GET /v1/pools and GET /v1/workers
show, for the signed-in tenant. Per pool: live slots (shared workers' and the tenant's own), the
priority classes' reserved shares of them, and the tenant's queue per class (waiting runs, the
oldest's wait, runs in flight); pausing the tenant's own queue in a pool (operators)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery

from ostinato import dispatch_controls as controls
from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.policy import fairness
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
            '{table}</section>',
            name=v.name, status=status, queue=queue, slots=slots, shared=v.shared_slots,
            own=v.own_slots, action=action, table=html.table(
                ["class", "reserved share", "reserved slots", "lendable", "waiting (yours)",
                 "oldest waiting", "in flight (yours)"], rows, "No class.", "classes")))
    form = fmt('<form method="get" action="/ui/pools" class="filters"><label>pool {p}</label>'
               '<label>class {c}</label><button type="submit">Filter</button> '
               '<a href="/ui/pools">clear</a></form>',
               p=html.select("pool", _pools(ui, pool), pool),
               c=html.select("priority", [("", "every class"),
                                          *((c.name, c.name) for c in classes)], priority))
    note = Safe('<p class="muted">Fair dispatch (docs/FAIRNESS.md): each class keeps its reserved '
                'share of a pool\'s live slots and may lend the lendable part of it while it '
                'does not need it; within a class, tenants share by weight. Waiting and in '
                'flight count this tenant\'s runs.</p>')
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
