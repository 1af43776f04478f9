"""The web UI's end-to-end world: the five services as processes, a worker, two tenants and
their runs (`world`), one headless Chromium per module (`browser`) and a fresh page per test
(`tab`). A test module takes the fixtures with `world, browser, tab = ui.world, ui.browser,
ui.tab`. OSTINATO_UI_SCREENSHOTS=<dir> saves a screenshot of each page there."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from ostinato.sdk import PermanentError, Worker, WorkflowContext, task, workflow
from tests.helpers.e2e import running_cluster
from tests.helpers.env import new_topic_prefix
from tests.helpers.lab.cluster import Cluster

playwright_api = pytest.importorskip("playwright.async_api")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
XSS_NAME = "<script>alert(1)</script>"
SHOTS = os.environ.get("OSTINATO_UI_SCREENSHOTS")
TIMEOUT_MS = 20_000  # Playwright's waits for an element (a condition, not a timed assertion)

if SHOTS:
    Path(SHOTS).mkdir(parents=True, exist_ok=True)

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing (infra/tools.sh installs it)", allow_module_level=True)


@task("greet")
async def greet(payload: dict) -> dict:
    return {"greeting": f"hello {payload.get('who')}"}


@task("boom")
async def boom(payload: dict) -> dict:
    raise PermanentError(f"cannot handle {payload.get('n')}; {payload.get('note')}",
                         type="bad_input")


@task("ui.chatty")
async def chatty(payload: dict) -> dict:
    log = logging.getLogger("ui.chatty")
    log.warning("fetching %s rows", payload.get("n"))  # warning: info is below the root level
    log.error("slow source: %s", payload.get("note"))
    return {"ok": True}


async def _fetch(n: int) -> list[int]:
    return list(range(n))


@workflow("ui.pipeline")
async def pipeline(ctx: WorkflowContext, payload: dict) -> dict:
    rows = await ctx.step("fetch", _fetch, payload["n"])
    total = await ctx.step("sum", sum, rows)
    return {"total": total}


@workflow("ui.waiter")
async def waiter(ctx: WorkflowContext, payload: dict) -> dict:
    await ctx.sleep(0.2)  # a timer
    approval = await ctx.wait_for_signal("approve")
    child = await ctx.child("greet", {"who": approval["by"]})
    return {"approved_by": approval["by"], "child": child}


@dataclass
class World:
    cluster: Cluster
    key: str
    other_key: str
    greet_job: str
    greet_run: str
    boom_job: str
    boom_run: str
    cron_job: str  # daily in Europe/Berlin, its payload holding XSS_NAME
    other_job: str
    other_run: str
    flow_run: str  # a workflow run with two recorded steps
    extra: dict[str, Any] = field(default_factory=dict)

    def h(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}"}


async def until(probe: Callable[[], Any], what: str, seconds: float = 60) -> Any:
    """Poll `probe` (async) until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        found = await probe()
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.2)


async def one_run(api: httpx.AsyncClient, h: dict[str, str], job_id: str,
                  state: str | None = None) -> str:
    async def probe() -> str | None:
        items = (await api.get("/v1/runs", params={"job_id": job_id}, headers=h)).json()["items"]
        return next((i["id"] for i in items if state is None or i["state"] == state), None)
    return await until(probe, f"a {state or 'any'} run of job {job_id}")


@pytest.fixture(scope="module")
async def world(template_db: str, tmp_path_factory: pytest.TempPathFactory
                ) -> AsyncIterator[World]:
    logs = tmp_path_factory.mktemp("ui-logs")
    # two of each service (the suite's default): the browser reaches the api through the lab's
    # balancer, which spreads connections without affinity; the UI's sessions are in
    # PostgreSQL, so either instance serves every page (tests/e2e/test_ui_sessions.py)
    async with running_cluster(template_db, new_topic_prefix(), logs) as cluster, \
            httpx.AsyncClient(base_url=cluster.api_url, timeout=10) as api:
        admin = {"Authorization": f"Bearer {cluster.admin_key}"}
        keys = {}
        for name in ("acme", "globex"):
            r = await api.post("/v1/tenants", json={"name": name}, headers=admin)
            assert r.status_code == 201, r.text
            keys[name] = r.json()["api_key"]
        h, other = ({"Authorization": f"Bearer {keys[n]}"} for n in ("acme", "globex"))

        async def job(body: dict[str, Any], headers: dict[str, str] = h) -> str:
            r = await api.post("/v1/jobs", json=body, headers=headers)
            assert r.status_code == 201, r.text
            return r.json()["id"]

        greet_job = await job({"name": "greet-now", "task": "greet", "payload": {"who": "ui"}})
        boom_job = await job({"name": "boom-now", "task": "boom",
                              "payload": {"n": 1, "note": XSS_NAME}})
        # a job's name cannot hold markup (the API refuses it); its payload and a handler's
        # error message can, and the UI shows both
        r = await api.post("/v1/jobs", json={"name": XSS_NAME, "task": "greet"}, headers=h)
        assert r.status_code == 422, r.text
        cron_job = await job({"name": "nightly-report", "task": "greet",
                              "payload": {"who": "cron", "note": XSS_NAME},
                              "schedule": {"cron": "30 2 * * *", "timezone": "Europe/Berlin"}})
        other_job = await job({"name": "theirs", "task": "greet"}, other)
        flow_job = await job({"name": "pipeline", "task": "ui.pipeline", "payload": {"n": 4}})
        worker = Worker(cluster.gateway_url, keys["acme"], [greet, boom, pipeline, waiter, chatty],
                        concurrency=4,
                        claim_wait_seconds=1, shutdown_grace_seconds=5)
        running = asyncio.create_task(worker.run())
        try:
            greet_run = await one_run(api, h, greet_job, "succeeded")
            boom_run = await one_run(api, h, boom_job, "dead_lettered")
            other_run = await one_run(api, other, other_job)
            flow_run = await one_run(api, h, flow_job, "succeeded")
            yield World(cluster=cluster, key=keys["acme"], other_key=keys["globex"],
                        greet_job=greet_job, greet_run=greet_run, boom_job=boom_job,
                        boom_run=boom_run, cron_job=cron_job, other_job=other_job,
                        other_run=other_run, flow_run=flow_run)
        finally:
            await worker.stop()
            await running


@pytest.fixture(scope="module")
async def browser(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    """One Chromium with a fresh profile directory for the module; each test gets a new page
    with no cookies."""
    async with playwright_api.async_playwright() as p:
        context = await p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM,
            headless=True, args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 800},
            timezone_id="UTC", locale="en-GB")
        context.set_default_timeout(TIMEOUT_MS)
        try:
            yield context
        finally:
            await context.close()


class Tab:
    """A page that records console errors, page errors and dialogs (an alert would be XSS)."""

    def __init__(self, page: Any, base: str) -> None:
        self.page = page
        self.base = base
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("dialog", self._dialog)

    async def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        await dialog.dismiss()

    async def goto(self, path: str) -> Any:
        return await self.page.goto(self.base + path)

    async def login(self, key: str) -> None:
        await self.goto("/ui/login")
        await self.page.fill("#api_key", key)
        await self.page.click("form.login button[type=submit]")
        await self.page.wait_for_url("**/ui/overview")  # the landing page

    async def shot(self, name: str) -> None:
        if SHOTS:
            await self.page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))

    def text(self, selector: str) -> Any:
        return self.page.locator(selector)


@pytest.fixture
async def tab(browser: Any, world: World) -> AsyncIterator[Tab]:
    await browser.clear_cookies()
    page = await browser.new_page()
    try:
        yield Tab(page, world.cluster.api_url)
    finally:
        await page.close()


def shown_id(value: str) -> str:
    """How a page shows an id that has no name beside it (the `id` macro, issue 41): its last 8
    hex digits, the random part; the first 8 of a UUIDv7 are the minute it was made in."""
    return "…" + uuid.UUID(value).hex[-8:]


async def api_get(world: World, path: str, key: str | None = None) -> Any:
    async with httpx.AsyncClient(base_url=world.cluster.api_url, timeout=10) as api:
        r = await api.get(path, headers=world.h(key))
        assert r.status_code == 200, r.text
        return r.json()


async def act(tab: Tab, box_selector: str, reason: str | None, *,
              fill: dict[str, str] | None = None, check: tuple[str, ...] = ()) -> str:
    """Open an action (the `action_form` macro's <details>), fill it in (selectors within it),
    give the reason, send it: its confirmation as shown, which is hidden until asked for."""
    box = tab.page.locator(box_selector)
    confirm = box.locator("p.confirm")
    assert not await confirm.is_visible()  # closed until asked for
    await box.locator("summary").click()
    shown = await confirm.inner_text()
    for selector in check:
        await box.locator(selector).check()
    for selector, value in (fill or {}).items():
        await box.locator(selector).fill(value)
    if reason is not None:
        await box.locator("input[name=reason]").fill(reason)
    async with tab.page.expect_navigation():
        await box.locator("button[type=submit]").click()
    return shown


async def audit_entry(tab: Tab, world: World, action: str, reason: str) -> dict[str, Any]:
    """The result's flash links the action's audit entry (the audit page filtered by the
    request's id), which holds and shows the reason."""
    link = tab.text("p.flash a")
    href = await link.get_attribute("href")
    assert href is not None and href.startswith("/ui/audit?request_id=")
    request_id = parse_qs(urlparse(href).query)["request_id"][0]
    [entry] = (await api_get(world, f"/v1/audit?request_id={request_id}"))["items"]
    assert (entry["action"], entry["outcome"]) == (action, "done"), entry
    assert f"reason: {reason}" in entry["detail"], entry
    await link.click()
    await tab.page.wait_for_url("**/ui/audit?request_id=*")
    shown = await tab.text("main").inner_text()
    assert action in shown and request_id in shown and reason in shown, shown
    return entry
