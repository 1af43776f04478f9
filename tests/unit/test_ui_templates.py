"""The web UI's templates (issue 41): one engine that escapes every value, the base layout
around every page (those still built in Python too), and the macros' escaping. Pure: rendered
to strings, no server."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import jinja2
import pytest

from ostinato.domain import roles
from services.api.ui import html, render

XSS = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def test_every_template_escapes_and_refuses_unknown_names() -> None:
    assert render.ENV.autoescape is True  # every template, whatever its file name
    assert render.ENV.undefined is jinja2.StrictUndefined
    tpl = render.ENV.from_string("{{ value }}")
    assert tpl.render(value=XSS) == ESCAPED
    with pytest.raises(jinja2.UndefinedError):
        tpl.render()


def test_markup_in_a_title_flash_tenant_or_body_value_is_text() -> None:
    body = html.fmt("<p>{v}</p>", v=XSS)
    page = html.page(XSS, body, section="runs", tenant=XSS, csrf="t0k", flash=XSS,
                     role=roles.OPERATOR)
    assert "<script>" not in page
    assert page.count(ESCAPED) == 5  # <title>, <h1>, the tenant, the flash, the body
    assert f"<p>{ESCAPED}</p>" in page  # the body's own markup kept, its value escaped once


def test_the_base_layout_holds_the_chrome_and_only_the_one_script_and_stylesheet() -> None:
    page = html.page("Runs", html.Safe("<p>x</p>"), section="runs", tenant="acme", csrf="t0k",
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
    viewer = html.page("Runs", html.Safe(""), tenant="acme", csrf="t", role=roles.VIEWER)
    assert '<a href="/ui/runs"' in viewer and '<a href="/ui/keys"' not in viewer
    anonymous = html.page("Log in", html.Safe(""))
    assert "<nav>" not in anonymous and "csrf-token" not in anonymous


def test_an_admin_acting_for_a_tenant_is_told_so() -> None:
    page = html.page("Runs", html.Safe(""), tenant="acme", csrf="t", role=roles.ADMIN,
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
