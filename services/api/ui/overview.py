"""The overview page, /ui/overview (the landing page after login): per pool, the tenant's runs
by state now, the oldest due age, start lag p50/p99 over the last hour and the minutes over the
lag SLO, failures and dead letters per hour of the last day, and the firing alerts, each with a
sparkline drawn on the server as inline SVG (no script; the strict CSP holds); every number
links to the list it counts. Figures: ostinato.policy.overview, from ostinato.stores.overview
(four statements, docs/UI.md "Overview")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from litestar import Response, get

from ostinato.policy import overview as figures
from ostinato.stores import overview as store
from services.api.ui.render import duration_text, url
from services.api.ui.scope import Ui

SPARK_W, SPARK_H = 120, 28  # SVG user units (ui.css draws them at this size)


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    over: bool  # over the threshold (a breach)


@dataclass(frozen=True, slots=True)
class Spark:
    """A sparkline: polylines (a gap where a point is missing) or bars, an optional threshold
    line, and what it shows in words (its accessible name)."""

    label: str
    lines: tuple[str, ...] = ()
    bars: tuple[Bar, ...] = ()
    threshold: float | None = None  # the threshold's y
    width: int = SPARK_W
    height: int = SPARK_H


def _scale(values: Sequence[float | None], floor: float | None) -> float:
    top = max([v for v in values if v is not None] + [floor or 0.0])
    return top if top > 0 else 1.0


def spark_line(values: Sequence[float | None], label: str, *,
               threshold: float | None = None) -> Spark:
    """A line through `values` left to right (None: no point, the line breaks); the threshold
    as a line, the scale reaching it."""
    top = _scale(values, threshold)
    n = max(len(values) - 1, 1)

    def y(v: float) -> float:
        return round(SPARK_H - 1 - (min(v, top) / top) * (SPARK_H - 2), 1)

    lines, run = [], []
    for i, v in enumerate(values):
        if v is None:
            if run:
                lines.append(run)
            run = []
            continue
        run.append(f"{round(i * (SPARK_W - 1) / n, 1)},{y(v)}")
    if run:
        lines.append(run)
    # a lone point draws as a short flat stroke, not nothing
    text = tuple(" ".join(r if len(r) > 1 else [r[0], _nudge(r[0])]) for r in lines)
    return Spark(label=label, lines=text, threshold=None if threshold is None else y(threshold))


def _nudge(point: str) -> str:
    x, y = point.split(",")
    return f"{float(x) + 1.5:.1f},{y}"


def spark_bars(values: Sequence[float], label: str, *, threshold: float | None = None) -> Spark:
    """A bar per value (a zero: none drawn); bars over `threshold` marked."""
    top = _scale(values, None)
    step = SPARK_W / max(len(values), 1)
    bars = tuple(Bar(x=round(i * step, 1), y=round(SPARK_H - h, 1), width=round(step * .8, 1),
                     height=round(h, 1), over=threshold is not None and v > threshold)
                 for i, v in enumerate(values) if v > 0
                 for h in (max(1.0, v / top * (SPARK_H - 1)),))
    return Spark(label=label, bars=bars)


@dataclass(frozen=True, slots=True)
class Figure:
    """One number of a pool's card: what it counts, the list it links to, its sparkline."""

    label: str
    value: str
    href: str
    spark: Spark | None = None
    note: str = ""
    alarm: bool = False  # shown as a problem (non-zero dead letters, a breach, a firing alert)


@dataclass(frozen=True, slots=True)
class StateCount:
    state: str
    runs: int
    href: str


@dataclass(frozen=True, slots=True)
class PoolCard:
    pool: str
    states: list[StateCount]
    live: int
    live_href: str
    figures: list[Figure]
    firing: list[figures.AlertEpisode]


def _seconds(v: float | None) -> str:
    return "—" if v is None else duration_text(v)


def pool_card(p: figures.PoolOverview, o: figures.Overview) -> PoolCard:
    since = figures.day_start(o.now).strftime("%Y-%m-%dT%H:%M:%S")
    runs = "/ui/runs"
    lag_spark = spark_line(p.lag_p99_by_minute, f"start lag p99 per minute of the last hour, "
                           f"pool {p.pool}, SLO {o.slo_seconds:g} s",
                           threshold=o.slo_seconds)
    breaches = [1.0 if v is not None and v > o.slo_seconds else 0.0 for v in p.lag_p99_by_minute]
    return PoolCard(
        pool=p.pool,
        states=[StateCount(s, n, url(runs, state=s, pool=p.pool)) for s, n in p.states.items()],
        live=p.live, live_href=url(runs, pool=p.pool),
        figures=[
            Figure("oldest due", _seconds(p.oldest_due_seconds),
                   url(runs, state="scheduled", pool=p.pool),
                   note="past due, waiting to start"),
            Figure("start lag p50 · p99", f"{_seconds(p.lag_p50)} · {_seconds(p.lag_p99)}",
                   url("/ui/pools", pool=p.pool), lag_spark,
                   note=f"{p.lag_starts} first starts, last hour"),
            Figure("SLO breaches", f"{p.breach_minutes} min", url("/ui/pools", pool=p.pool),
                   spark_bars(breaches, f"minutes of the last hour with start lag p99 over "
                              f"{o.slo_seconds:g} s, pool {p.pool}", threshold=0.5),
                   note=f"minutes of the last hour with p99 over {o.slo_seconds:g} s",
                   alarm=p.breach_minutes > 0),
            Figure("failures", str(p.failed), url(runs, pool=p.pool, since=since),
                   spark_bars(p.failed_by_hour, f"runs ended after a failed attempt per hour "
                              f"of the last day, pool {p.pool}"),
                   note="runs ended after a failed attempt, last 24 h"),
            Figure("dead letters", str(p.dead_letters),
                   url(runs, state="dead_lettered", pool=p.pool),
                   spark_bars(p.dead_letters_by_hour, f"runs dead-lettered per hour of the last "
                              f"day, pool {p.pool}", threshold=0),
                   note="last 24 h", alarm=p.dead_letters > 0),
            Figure("alerts firing", str(len(p.firing)), "#alerts",
                   spark_bars(p.alerts_by_hour, f"alert episodes started per hour of the last "
                              f"day, pool {p.pool}"),
                   note="this pool's", alarm=bool(p.firing)),
        ],
        firing=p.firing)


@get("/overview", include_in_schema=False)
async def overview_page(ui: Ui) -> Response[str]:
    now = ui.clock.now()
    rows = await store.read(ui.conn, ui.tenant_id, now)
    o = figures.summarize(ui.settings.pool_names, rows.live, rows.ended, rows.lags, rows.alerts,
                          now=now, slo_seconds=ui.settings.alert_lag_slo_seconds)
    return ui.render(
        "overview.html", section="overview", cards=[pool_card(p, o) for p in o.pools],
        firing=o.firing, tenant_firing=o.tenant_firing,
        alerts_spark=spark_bars(o.alerts_by_hour, "alert episodes started per hour of the "
                                "last day, every alert of the tenant"),
        dead_letters_href="/ui/dead-letters", now=now, slo=o.slo_seconds,
        lag_minutes=figures.LAG_MINUTES, hours=figures.HOURS)


ROUTES = [overview_page]
