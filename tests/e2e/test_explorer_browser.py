"""The memory explorer in a real browser: Debian's chromium, driven by Playwright, over the operator
API served on a real port, with real NATS JetStream and PostgreSQL behind it.

An operator opens /ui/, pastes a token, types a workspace and uses the page as a person would: what
is checked is what the page shows. Any console error, uncaught exception or failed request (a module
that does not load, a refused CSP, an API call the page gets wrong) fails the test, so a page that
breaks in a browser cannot pass while the static checks of tests/unit/test_api_ui.py do.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import uvicorn

from noema.runtime.embedded import free_port
from tests.integration.api_harness import ADMIN, ApiHarness, api, memory, relationship
from tests.support import assert_eventually

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["api"]

STEP_TIMEOUT_MS = 10_000
"""How long one step waits for the page (an action, or an ``expect`` to hold)."""
SETUP = "run `make setup`: it installs Playwright (requirements.lock) and Debian's chromium package"


@pytest.fixture
async def served(api: ApiHarness) -> AsyncIterator[str]:
    """The harness's API app served by uvicorn on a free port of 127.0.0.1; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(
        api.app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(), name="uvicorn")

    async def started() -> bool:
        assert not task.done(), "uvicorn stopped before serving"
        return server.started

    await assert_eventually(started, what="uvicorn serving")
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await asyncio.wait_for(task, 10)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """Headless chromium from PATH (Debian's package), never a browser Playwright downloads: a
    missing one fails the test, saying how to get it."""
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail(f"no chromium on PATH: {SETUP}", pytrace=False)
    try:
        from playwright.async_api import async_playwright, expect
    except ImportError:
        pytest.fail(f"Playwright is not installed: {SETUP}", pytrace=False)
    expect.set_options(timeout=STEP_TIMEOUT_MS)
    # Chromium's sandbox refuses to run as root; as anyone else it stays on.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=executable, headless=True, args=args)
        yield launched
        await launched.close()


@dataclass
class Explorer:
    """A browser tab on the explorer, and what went wrong in it."""

    page: Page
    problems: list[str]
    folder: Path

    @asynccontextmanager
    async def steps(self) -> AsyncIterator[None]:
        """A failing step names the errors the page reported, and leaves a picture of the page."""
        try:
            yield
        except Exception as exc:
            path = self.folder / "explorer.png"
            await self.page.screenshot(path=str(path), full_page=True)
            exc.add_note(f"the page when it failed: {path}")
            if self.problems:
                exc.add_note("the page reported:\n" + "\n".join(self.problems))
                self.problems.clear()  # said here, not again at teardown
            raise


@asynccontextmanager
async def open_tab(browser: Browser, base_url: str, folder: Path) -> AsyncIterator[Explorer]:
    """A fresh tab on the explorer served at ``base_url``; at the end, whatever went wrong in it
    fails: a console error (a module that did not load, a CSP refusal, an API error), an uncaught
    exception, a request that failed."""
    context = await browser.new_context(base_url=base_url, viewport={"width": 1400, "height": 900})
    # Past the API's after_seq bound (5 s), so a slow projector on a loaded machine is no failure,
    # and short of Playwright's 30 s, so a page that never shows something fails soon.
    context.set_default_timeout(STEP_TIMEOUT_MS)
    tab = Explorer(await context.new_page(), [], folder)
    report = tab.problems.append
    tab.page.on("console", lambda msg: report(f"console: {msg.text}") if msg.type == "error" else None)
    tab.page.on("pageerror", lambda error: report(f"uncaught: {error}"))
    tab.page.on("requestfailed", lambda req: report(f"failed: {req.method} {req.url} ({req.failure})"))
    try:
        yield tab
    finally:
        await context.close()
    assert not tab.problems, "the page reported errors:\n" + "\n".join(tab.problems)


@pytest.fixture
async def explorer(browser: Browser, served: str, tmp_path: Path) -> AsyncIterator[Explorer]:
    """A fresh tab on the served explorer (:func:`open_tab`)."""
    async with open_tab(browser, served, tmp_path) as tab:
        yield tab


async def sign_in(tab: Page, workspace: str, token: str = ADMIN) -> None:
    """Open the page, paste ``token`` into the dialog it opens with, and type a workspace."""
    from playwright.async_api import expect

    await tab.goto("/ui/")
    dialog = tab.locator("#token-dialog")
    await expect(dialog).to_be_visible()
    await dialog.locator("#token").fill(token)
    await dialog.get_by_role("button", name="Sign in").click()
    await expect(dialog).to_be_hidden()
    await expect(tab.locator("#signin")).to_have_text("Sign out")
    await tab.locator("#workspace").fill(workspace)
    await tab.locator("#workspace").press("Tab")  # the change event, as leaving the field sends it


async def answer(page: Page, **fields: str) -> None:
    """Fill the page's own dialog (never the browser's prompt()) and confirm it."""
    from playwright.async_api import expect

    dialog = page.locator("dialog.ask")
    await expect(dialog).to_be_visible()
    for name, value in fields.items():
        await dialog.locator(f"[name={name}]").fill(value)
    await dialog.locator("menu button").last.click()
    await expect(dialog).to_have_count(0)


async def test_an_operator_searches_opens_a_memory_marks_it_inaccurate_and_reads_the_timeline_and_audit(
    api: ApiHarness, explorer: Explorer
) -> None:
    from playwright.async_api import expect

    page = explorer.page

    window, *_ = await api.given(
        memory(
            "the deploy window is tuesday mornings", domain="ops", source_observation_ids=["call-0302-ann"]
        ),
        memory("the pager rotates on mondays"),
        memory("the deploy window of globex is fridays", workspace="globex"),
    )
    view, detail = page.locator("#view"), page.locator("#detail")
    async with explorer.steps():
        await sign_in(page, "acme")

        # Search: the agents' ranking, this workspace only, with each score explained.
        await view.locator("input[name=q]").fill("deploy window")
        await view.get_by_role("button", name="Search").click()
        cards = view.locator(".card")
        await expect(cards).to_have_count(1)
        await expect(cards.first.locator(".content")).to_have_text("the deploy window is tuesday mornings")
        await expect(view.locator("p.meta").first).to_contain_text("1 results · mode hybrid")
        await expect(cards.first.locator(".bar span").first).to_be_visible()

        # The detail: the record and its provenance.
        await cards.first.click()
        await expect(detail).to_be_visible()
        await expect(detail.locator("h2")).to_have_text("the deploy window is tuesday mornings")
        await expect(detail.get_by_role("heading", name="Provenance")).to_be_visible()
        await expect(detail.locator("summary").first).to_have_text(
            re.compile(r"^origin event: memory\.created\.v1 #1 by test, ")
        )

        # An observation id an agent chose is shown whole (only UUIDs are shortened).
        await expect(detail.locator(".meta .mono", has_text="call-0302-ann")).to_have_text("call-0302-ann")
        # Each score component as a person reads it: ranks as ranks, the memory's time as a time.
        components = cards.first.locator("details")
        await components.locator("summary").click()
        await expect(components.locator("tr", has_text="lexical_rank").locator("td")).to_have_text("#1")
        await expect(components.locator("tr", has_text="temporal_score").locator("td")).to_have_text(
            re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")
        )

        # Inaccurate…: a write through the page, shown at once in the detail and the search. The
        # page asks in a dialog of its own; cancelled, nothing is written.
        await detail.get_by_role("button", name="Inaccurate…").click()
        await page.locator("dialog.ask").get_by_role("button", name="Cancel").click()
        await expect(detail.get_by_role("button", name="Inaccurate…")).to_be_visible()
        await detail.get_by_role("button", name="Inaccurate…").click()
        asked = page.locator("dialog.ask")
        await asked.locator("[name=reason]").fill("   ")  # a blank reason is no reason: it stays open
        await asked.locator("[name=reason]").press("Enter")
        await expect(asked).to_be_visible()
        await asked.locator("[name=reason]").fill("the window moved to wednesdays")
        await asked.locator("[name=reason]").press("Enter")  # Enter confirms, as in any form
        await expect(asked).to_have_count(0)
        notice = detail.locator(".notice.retracted")
        await expect(notice).to_contain_text("Retracted: marked inaccurate.")
        await expect(notice).to_contain_text("operator:alice")
        await expect(notice).to_contain_text("“the window moved to wednesdays”")
        await expect(detail.get_by_role("button", name="Restore…")).to_be_visible()
        await expect(view.locator(".empty")).to_have_text(re.compile("^nothing found in workspace acme"))

        # The timeline: both memories of acme by day, the retracted one badged.
        await page.locator("#tabs").get_by_role("button", name="Timeline").click()
        await expect(view.locator(".card")).to_have_count(2)
        await expect(view.locator(".day")).to_have_count(1)
        await expect(view.locator(".card.retracted .content")).to_have_text(
            "the deploy window is tuesday mornings"
        )

        # As of seq 3, before the retraction (#4): the same timeline, nothing retracted yet; the
        # page names the point the API answered for. Emptied: the present again.
        as_of = page.locator("#as-of")
        await as_of.fill("3")
        await as_of.press("Tab")
        await expect(page.locator("#as-of-shown")).to_contain_text("as of seq 3 (")
        await expect(view.locator(".card")).to_have_count(2)
        await expect(view.locator(".card.retracted")).to_have_count(0)
        await as_of.fill("")
        await as_of.press("Tab")
        await expect(view.locator(".card.retracted")).to_have_count(1)
        await expect(page.locator("#as-of-shown")).to_have_text("")

        # The audit: acme's events, the operator's action among them, its payload on demand.
        await page.locator("#tabs").get_by_role("button", name="Audit").click()
        events = view.locator("details")
        await expect(events).to_have_count(3)  # two memories and one retraction; globex's not
        action = events.filter(has_text="operator.action.v1")
        await expect(action.locator("summary")).to_contain_text("by operator:alice")
        await action.locator("summary").click()
        await expect(action.locator("pre")).to_contain_text(f'"target_id": "{window}"')

        # Why: the memory's history as a timeline, its creation and then the retraction.
        await detail.get_by_role("button", name="Why?").click()
        steps = view.locator("ol.timeline li")
        await expect(steps).to_have_count(2)
        await expect(steps.nth(0)).to_contain_text("memory.created.v1 #1 by test")
        await expect(steps.nth(1)).to_contain_text("operator.action.v1 #4 by operator:alice")
        await expect(steps.nth(1)).to_contain_text("reason the window moved to wednesdays")
        await expect(page.locator("#error")).to_be_hidden()

        # Restore…, with a search shown that misses the retracted memory: the list follows at once.
        await page.locator("#tabs").get_by_role("button", name="Search").click()
        await view.locator("input[name=q]").fill("deploy window")
        await view.get_by_role("button", name="Search").click()
        await expect(view.locator(".empty")).to_have_text(re.compile("^nothing found in workspace acme"))
        await detail.get_by_role("button", name="Restore…").click()
        await answer(page, reason="it was right after all")
        await expect(view.locator(".card .content")).to_have_text(["the deploy window is tuesday mornings"])
        await expect(detail.get_by_role("button", name="Inaccurate…")).to_be_visible()

        # Another workspace: the open detail (acme's memory) closes, the search runs there.
        await page.locator("#workspace").fill("globex")
        await page.locator("#workspace").press("Tab")
        await expect(detail).to_be_hidden()
        await expect(view.locator(".card .content")).to_have_text(["the deploy window of globex is fridays"])
        await expect(page.locator("#error")).to_be_hidden()


async def test_an_operator_draws_a_neighbourhood_proposes_a_policy_and_visits_every_tab(
    api: ApiHarness, explorer: Explorer
) -> None:
    from playwright.async_api import expect

    page = explorer.page

    root, neighbour = await api.given(
        memory("the deploy key rotates monthly"), memory("the vault holds the deploy key")
    )
    await api.given(relationship(root, neighbour))
    view, detail, tabs = page.locator("#view"), page.locator("#detail"), page.locator("#tabs")
    async with explorer.steps():
        await sign_in(page, "acme")

        # From a memory's detail to its neighbourhood in the graph.
        await view.locator("input[name=q]").fill("deploy key rotates")
        await view.get_by_role("button", name="Search").click()
        await view.locator(".card", has_text="the deploy key rotates monthly").click()
        await expect(detail.get_by_role("heading", name="Relationships (1)")).to_be_visible()
        await expect(detail.locator("table a")).to_have_text("the vault holds the deploy key")
        await detail.get_by_role("button", name="Show in graph").click()
        await expect(tabs.locator("button.active")).to_have_text("Knowledge graph")
        await expect(view.locator("input[name=root]")).to_have_value(root)
        await expect(view.locator("svg circle")).to_have_count(2)
        await expect(view.locator("svg line")).to_have_count(1)
        await expect(view.locator("svg text")).to_have_text(
            ["the deploy key rotates mont…", "the vault holds the deploy …"]
        )
        await expect(view.locator(".legend").last).to_contain_text("2 memories, 1 edges")

        # A node opens that memory's detail.
        await view.locator("svg circle").nth(1).click()
        await expect(detail.locator("h2")).to_have_text("the vault holds the deploy key")

        # Propose a policy: the table shows it after the write, without a reload.
        await tabs.get_by_role("button", name="Policies").click()
        await expect(view.locator(".empty")).to_have_text("no policies in workspace acme")
        form = view.locator("form")
        await form.locator("input[name=domain]").fill("ops")
        await form.locator("input[name=rule]").fill("page the secondary after ten minutes")
        await form.locator("input[name=reason]").fill("runbook")
        await form.get_by_role("button", name="Propose policy").click()
        row = view.locator("tbody tr")
        await expect(row).to_have_count(1)
        await expect(row).to_contain_text("page the secondary after ten minutes")
        await expect(row.locator(".badge")).to_have_text("active")
        await expect(form.locator("input[name=rule]")).to_have_value("")

        # Propose a fact: its detail opens once it is projected.
        await tabs.get_by_role("button", name="Add knowledge").click()
        fact = view.locator("form").first
        await fact.locator("input[name=content]").fill("backups run at midnight")
        await fact.locator("input[name=domain]").fill("ops")
        await fact.locator("input[name=topic]").fill("backups")
        await fact.locator("input[name=reason]").fill("runbook")
        await fact.get_by_role("button", name="Propose fact").click()
        await expect(detail.locator("h2")).to_have_text("backups run at midnight")

        # Facts lists it (the seeded memories are facts too, of no domain); conflicts and grants render.
        await tabs.get_by_role("button", name="Facts").click()
        await expect(view.locator("tbody tr")).to_have_count(3)
        await view.locator("input[name=domain]").fill("ops")
        await view.get_by_role("button", name="List").click()
        await expect(view.locator("tbody tr")).to_have_count(1)
        await expect(view.locator("tbody tr")).to_contain_text("backups run at midnight")
        await tabs.get_by_role("button", name="Conflicts").click()
        await expect(view.locator(".empty")).to_have_text("no conflicts recorded")
        await tabs.get_by_role("button", name="Grants").click()
        await expect(view.locator("p.meta").first).to_contain_text("access mode: ")
        await expect(page.locator("#error")).to_be_hidden()


async def test_an_erased_memory_shows_as_erased_with_nothing_to_do_to_it(
    api: ApiHarness, explorer: Explorer
) -> None:
    from playwright.async_api import expect

    page = explorer.page
    gone, _ = await api.given(memory("Ann's phone is 555-0199"), memory("the pager rotates on mondays"))
    body = {"workspace": "acme", "scope": "memory", "target": gone, "reason": "GDPR request 812"}
    erased = await api.admin.post("/v1/erasures", json=body)
    assert erased.status_code == 200, erased.text
    await api.caught_up()
    view, detail = page.locator("#view"), page.locator("#detail")
    async with explorer.steps():
        await sign_in(page, "acme")
        await page.locator("#tabs").get_by_role("button", name="Timeline").click()
        await expect(view.locator(".card")).to_have_count(2)
        card = view.locator(".card.erased")
        await expect(card.locator(".content")).to_have_text(re.compile(r"^\(content erased at .+\)$"))
        await expect(card.locator(".badge", has_text="erased")).to_be_visible()
        await card.click()
        await expect(detail.locator(".notice.erased")).to_contain_text("Erased: its content is gone for good")
        await expect(detail.locator("h2")).to_have_text(re.compile(r"^\(content erased at .+\)$"))
        for action in ("Inaccurate…", "Correct…", "Archive…", "Restore…"):
            await expect(detail.get_by_role("button", name=action)).to_have_count(0)
        await expect(page.locator("#error")).to_be_hidden()
