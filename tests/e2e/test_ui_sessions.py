"""Two real api processes on one database, no affinity (issue 39 item 1): a browser logged in on
one instance is served by the other, page after page and form after form: the CSRF token, a
flash set by a form on one and shown once by the other, the tenant an admin session acts for;
an api instance restarted logs nobody out; a logout on one ends the session on both. (The
sessions' rows themselves: tests/integration/test_ui_sessions.py.)"""

from __future__ import annotations

import asyncio
import re
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.env import KAFKA_BOOTSTRAP, app_url_for, drop_database, fresh_database
from tests.helpers.lab.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
CSRF = re.compile(r'name="_csrf" value="([^"]+)"')
LOGIN = re.compile(r'name="_login" value="([^"]+)"')


@pytest.fixture
async def apis(template_db: str, topic_prefix: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    """Only the api, twice (`api`, `api-2`), each reached on its own port here."""
    name = await fresh_database(template_db)
    cluster = Cluster(database_url=app_url_for(name), kafka_bootstrap=KAFKA_BOOTSTRAP,
                      topic_prefix=topic_prefix, log_dir=tmp_path / "logs",
                      instances=2)
    try:
        await asyncio.to_thread(cluster.start, ("api",))
        yield cluster
    finally:
        codes = await asyncio.to_thread(cluster.stop)
        await drop_database(name)
    assert codes == {alias: 0 for alias in codes}, codes


class Browser:
    """One HTTP client, so one cookie jar, for both instances, as a browser holds its cookies
    (a cookie names a host and a path, not a port)."""

    def __init__(self, cluster: Cluster, http: httpx.AsyncClient) -> None:
        self.cluster, self.http = cluster, http

    async def on(self, alias: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """`method path` sent to the instance `alias` (its port now: a restart may change it)."""
        return await self.http.request(
            method, f"http://127.0.0.1:{self.cluster.ports[alias]}{path}", **kwargs)

    async def login(self, alias: str, key: str) -> httpx.Response:
        form = await self.on(alias, "GET", "/ui/login")
        token = LOGIN.search(form.text)
        assert token, form.text
        return await self.on(alias, "POST", "/ui/login",
                             data={"_login": token.group(1), "api_key": key})


@pytest.fixture
async def browser(apis: Cluster) -> AsyncIterator[Browser]:
    async with httpx.AsyncClient(timeout=30) as http:
        yield Browser(apis, http)


def csrf_of(page: httpx.Response) -> str:
    found = CSRF.search(page.text)
    assert found, page.text
    return found.group(1)


async def test_a_browser_logged_in_on_one_api_instance_is_served_by_the_other(
        apis: Cluster, browser: Browser) -> None:
    admin = {"Authorization": f"Bearer {apis.admin_key}"}
    r = await browser.on("api", "POST", "/v1/tenants", json={"name": "two-apis"}, headers=admin)
    assert r.status_code == 201, r.text
    tenant_id, key = r.json()["id"], r.json()["api_key"]
    r = await browser.on("api-2", "POST", "/v1/jobs", headers={"Authorization": f"Bearer {key}"},
                         json={"name": "nightly",
                               "schedule": {"cron": "0 3 * * *", "timezone": "UTC"}})
    assert r.status_code == 201, r.text
    job = r.json()["id"]

    assert (await browser.login("api", key)).status_code == 303  # signed in on instance 1
    page = await browser.on("api-2", "GET", "/ui/runs")  # the next page on instance 2
    assert page.status_code == 200, page.text
    assert "two-apis" in page.text
    csrf = csrf_of(page)
    assert csrf_of(await browser.on("api", "GET", "/ui/runs")) == csrf  # one session

    # a form on instance 2, its redirect followed on instance 1: the flash goes along, once
    r = await browser.on("api-2", "POST", f"/ui/jobs/{job}/pause", data={"_csrf": csrf})
    assert r.status_code == 303, r.text
    assert "Job paused:" in (await browser.on("api", "GET", f"/ui/jobs/{job}")).text
    assert "Job paused:" not in (await browser.on("api-2", "GET", f"/ui/jobs/{job}")).text

    # logged out on instance 1: instance 2 no longer knows the session either, even when the
    # old cookie is sent again
    old = browser.http.cookies.get("ostinato_session", path="/ui")
    r = await browser.on("api", "POST", "/ui/logout", data={"_csrf": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    r = await browser.on("api-2", "GET", "/ui/runs", headers={"Cookie": f"ostinato_session={old}"})
    assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")

    # the admin key's session: the tenant chosen on one instance is acted for on the other
    assert (await browser.login("api-2", apis.admin_key)).status_code == 303
    tenants = await browser.on("api", "GET", "/ui/tenants")
    assert tenants.status_code == 200, tenants.text
    r = await browser.on("api", "POST", f"/ui/tenants/{tenant_id}/act",
                         data={"_csrf": csrf_of(tenants)})
    assert r.status_code == 303 and r.headers["location"] == "/ui/runs", r.text
    page = await browser.on("api-2", "GET", "/ui/runs")
    assert page.status_code == 200 and "Acting for tenant two-apis." in page.text


async def test_an_api_instance_restarted_logs_nobody_out(apis: Cluster, browser: Browser) -> None:
    admin = {"Authorization": f"Bearer {apis.admin_key}"}
    r = await browser.on("api-2", "POST", "/v1/tenants",
                         json={"name": f"restart-{uuid.uuid4().hex[:6]}"}, headers=admin)
    assert r.status_code == 201, r.text
    assert (await browser.login("api-2", r.json()["api_key"])).status_code == 303
    assert (await browser.on("api-2", "GET", "/ui/runs")).status_code == 200
    apis.kill("api-2", signal.SIGTERM)
    assert await asyncio.to_thread(apis.procs["api-2"].wait, 60) == 0
    await asyncio.to_thread(apis.spawn, "api-2", "api")  # a new process, its memory empty
    page = await browser.on("api-2", "GET", "/ui/runs")
    assert page.status_code == 200, page.text  # still logged in
