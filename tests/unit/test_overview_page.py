"""The overview page's rendering without servers (services/api/ui/overview.py and its template):
the sparklines' geometry (gaps, the threshold, bars over it), every number a link to the list it
counts with the pool and state in its query, values escaped, no inline script or style (the
strict CSP), each chart named for a screen reader."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

from ostinato.policy.overview import (
    LAG_MINUTES,
    AlertEpisode,
    EndedHour,
    LagBucket,
    LiveCount,
    lag_start,
    summarize,
)
from services.api.ui import overview as page
from services.api.ui.render import Chrome, render_text

NOW = datetime(2026, 3, 2, 14, 30, 20, tzinfo=UTC)
XSS = "<script>alert(1)</script>"


def test_a_line_breaks_where_a_minute_has_no_point_and_draws_the_threshold() -> None:
    s = page.spark_line([1.0, 2.0, None, 4.0], "lag", threshold=8.0)
    assert len(s.lines) == 2  # [1, 2] and the lone 4 (drawn as a short stroke)
    first = [tuple(map(float, p.split(","))) for p in s.lines[0].split()]
    assert first[0][0] == 0 and first[1][1] < first[0][1]  # higher value: nearer the top
    assert s.threshold is not None and s.threshold < first[1][1]  # the SLO line above
    assert page.spark_line([None, None], "none").lines == ()


def test_bars_only_for_non_zero_values_and_marked_over_the_threshold() -> None:
    s = page.spark_bars([0, 3, 0, 1], "dl", threshold=2)
    assert [b.over for b in s.bars] == [True, False]
    assert s.bars[0].height > s.bars[1].height > 0
    assert s.bars[0].x < s.bars[1].x


def _overview() -> str:
    m0 = lag_start(NOW)
    o = summarize(
        ["default", "batch"],
        [LiveCount("default", "scheduled", 3, NOW - timedelta(seconds=90)),
         LiveCount("default", "running", 2, None)],
        [EndedHour("default", NOW.replace(minute=0, second=0), 5, 2, 3)],
        [LagBucket("default", m0 + timedelta(minutes=LAG_MINUTES - 1), 120, 3, 95.0)],
        [AlertEpisode("k", "OstinatoLagSLOBreach", "firing", "default", "warning", XSS,
                      NOW - timedelta(minutes=2), None)],
        now=NOW, slo_seconds=60)
    cards = [page.pool_card(p, o) for p in o.pools]
    return render_text("overview.html", chrome=Chrome(), cards=cards, firing=o.firing,
                       tenant_firing=o.tenant_firing,
                       alerts_spark=page.spark_bars(o.alerts_by_hour, "alerts"),
                       dead_letters_href="/ui/dead-letters", now=NOW, slo=60.0,
                       lag_minutes=LAG_MINUTES, hours=24)


def test_every_number_links_to_the_list_it_counts() -> None:
    html = _overview()
    states = [(parse_qs(urlsplit(href.replace("&amp;", "&")).query), state, n) for href, state, n
              in re.findall(r'href="([^"]+)" data-state="([^"]+)">.*?<span class="n">(\d+)<',
                            html)]
    assert len(states) == 2 * 6  # every live state of both pools
    assert all(q["state"] == [state] for q, state, _ in states)
    assert ({"state": ["scheduled"], "pool": ["default"]}, "scheduled", "3") in states
    assert ({"state": ["running"], "pool": ["batch"]}, "running", "0") in states
    hrefs = [h.replace("&amp;", "&") for h in re.findall(r'<a class="n" href="([^"]+)"', html)]
    assert len(hrefs) == 2 * 6  # six figures per pool, two pools
    assert "/ui/runs?state=dead_lettered&pool=default" in hrefs
    assert "/ui/runs?state=dead_lettered&pool=batch" in hrefs
    assert "/ui/pools?pool=default" in hrefs and "#alerts" in hrefs
    assert 'data-figure="dead letters">2</a>' in html
    assert 'data-figure="SLO breaches">1 min</a>' in html


def test_values_are_escaped_and_no_inline_script_or_style() -> None:
    html = _overview()
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>" not in html.replace('<script src="/ui/static/ui.js" defer></script>', "")
    assert " style=" not in html and "<style" not in html
    charts = re.findall(r"<svg [^>]*>", html)
    assert charts and all('role="img"' in c and "aria-label=" in c for c in charts)
