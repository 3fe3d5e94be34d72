"""The explorer asked about the past as a new user asks it: `noemactl up` on the embedded default
(what `make run` starts: the API signs in as the read-only database role), Debian's chromium driven
by Playwright, and no command run first. A search and the fact list answer as of an earlier stream
sequence and as of an earlier time, and a memory retracted since shows as it was then: active, with
its content; in the present, retracted.

One `up` for the module and one browser (the harness of test_explorer_browser.py); what is checked
is what the page shows.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.e2e.test_explorer_browser import browser, open_tab, sign_in
from tests.e2e.test_noemactl import API_PORTS, ctl, start, stop

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page

    from tests.e2e.test_explorer_browser import Explorer

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["browser"]


@dataclass(frozen=True)
class Up:
    """A running `noemactl up`: its API's base URL and an operator token (`noemactl api token`)."""

    url: str
    token: str


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    path = Path(tempfile.mkdtemp(prefix="noema-e2e-", dir="/tmp"))
    data_dir = path / "var"
    process = start(data_dir)
    try:
        token = ctl(data_dir, "api", "token").stdout.strip()
        yield Up(f"http://127.0.0.1:{API_PORTS[str(data_dir)]}", token)
    finally:
        assert stop(process) == 0
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def explorer(browser: Browser, up: Up, tmp_path: Path) -> AsyncIterator[Explorer]:
    async with open_tab(browser, up.url, tmp_path) as tab:
        yield tab


async def _written(http: httpx.AsyncClient, path: str, body: dict[str, str]) -> tuple[str, int]:
    """POST a write; its memory id and the stream sequence that stored it."""
    answer = await http.post(path, json=body)
    assert answer.status_code in (200, 202), answer.text
    return answer.json()["memory_id"], int(answer.headers["Noema-Stream-Seq"])


async def _fact(http: httpx.AsyncClient, topic: str, content: str) -> tuple[str, int]:
    body = {"workspace": "acme", "domain": "ops", "topic": topic, "content": content, "reason": "runbook"}
    return await _written(http, "/v1/facts", body)


async def _ask_as_of(page: Page, point: str, shown: str | re.Pattern[str]) -> None:
    """Type a point into the page's *as of* field (empty: now) and see the page name the point it got."""
    from playwright.async_api import expect

    field = page.locator("#as-of")
    await field.fill(point)
    await field.press("Tab")  # the change event, as leaving the field sends it
    await expect(page.locator("#as-of-shown")).to_have_text(shown)


WINDOW = "the deploy window is tuesday mornings"
PAGER = "the pager rotates on mondays"


async def test_under_up_the_explorer_answers_as_of_a_seq_and_a_time_and_shows_a_retracted_memory_as_it_was(
    up: Up, explorer: Explorer
) -> None:
    from playwright.async_api import expect

    async with httpx.AsyncClient(base_url=up.url, headers={"Authorization": f"Bearer {up.token}"}) as http:
        window, first = await _fact(http, "deploys", WINDOW)
        _, second = await _fact(http, "pager", PAGER)
        shown = await http.get(f"/v1/memories/{window}", params={"after_seq": second})  # projected
        assert shown.status_code == 200, shown.text
        # A time after both facts were stored and before the retraction (the stream's clock is this
        # machine's): as of it, both facts hold and the window is active.
        before_retraction = datetime.now(UTC)
        _, retracted = await _written(
            http, f"/v1/memories/{window}/retract", {"reason": "the window moved to wednesdays"}
        )
        applied = await http.get(f"/v1/memories/{window}", params={"after_seq": retracted})
        assert applied.json()["memory"]["status"] == "retracted", applied.text  # the present, projected

    page = explorer.page
    view, detail, tabs = page.locator("#view"), page.locator("#detail"), page.locator("#tabs")
    at_time = before_retraction.isoformat().replace("+00:00", "Z")
    as_of_time = re.compile(rf"^as of seq \d+ \({re.escape(before_retraction.isoformat())}\)$")
    async with explorer.steps():
        await sign_in(page, "acme", up.token)

        # Now: the retracted window is out of normal recall. (By keyword: the semantic voice would
        # rank the pager too, as a neighbour of any question about ops.)
        await view.locator("input[name=q]").fill("deploy window")
        await view.locator("select[name=mode]").select_option("keyword")
        await view.get_by_role("button", name="Search").click()
        await expect(view.locator(".empty")).to_have_text(re.compile("^nothing found in workspace acme"))

        # As of the sequence that stored the window (before the pager's): the search shown finds it,
        # active; the page names the point the API answered for.
        await _ask_as_of(page, str(first), re.compile(rf"^as of seq {first} \("))
        cards = view.locator(".card")
        await expect(cards.locator(".content")).to_have_text([WINDOW])
        await expect(cards.first).not_to_have_class(re.compile(r"\bretracted\b"))
        await expect(cards.first.locator(".badge").first).to_have_text("active")

        # As of a time before the retraction: found too, and its detail shows it as it was then.
        await _ask_as_of(page, at_time, as_of_time)
        await expect(cards.locator(".content")).to_have_text([WINDOW])
        await cards.first.click()
        await expect(detail.locator("h2")).to_have_text(WINDOW)
        await expect(detail.locator(".meta .badge").first).to_have_text("active")
        await expect(detail.locator(".notice")).to_have_count(0)
        # A past state is read, not acted on: the operator's actions are the present's.
        await expect(detail.get_by_role("button", name="Inaccurate…")).to_have_count(0)
        await expect(detail.locator(".past")).to_contain_text("as of a past point")

        # The fact list as of that time: both facts, both active.
        await tabs.get_by_role("button", name="Facts").click()
        rows = view.locator("tbody tr")
        await expect(rows.locator("td:nth-child(3)")).to_have_text([WINDOW, PAGER])
        await expect(rows.locator(".badge")).to_have_text(["active", "active"])
        await expect(page.locator("#as-of-shown")).to_have_text(as_of_time)

        # As of the first sequence: the window alone.
        await _ask_as_of(page, str(first), re.compile(rf"^as of seq {first} \("))
        await expect(rows.locator("td:nth-child(3)")).to_have_text([WINDOW])
        await expect(rows.locator(".badge")).to_have_text(["active"])

        # Now: the window is retracted; listed only with the inactive ones, and badged so. The
        # detail left open follows the field to the present, with the retraction's notice.
        await _ask_as_of(page, "", "")
        await expect(rows.locator("td:nth-child(3)")).to_have_text([PAGER])
        await expect(detail.locator(".notice.retracted")).to_contain_text("Retracted: marked inaccurate.")
        await expect(detail.locator(".notice.retracted")).to_contain_text("“the window moved to wednesdays”")
        await expect(detail.get_by_role("button", name="Restore…")).to_be_visible()
        await view.locator("input[name=include_inactive]").check()
        await view.get_by_role("button", name="List").click()
        await expect(rows.locator("td:nth-child(3)")).to_have_text([WINDOW, PAGER])
        await expect(rows.locator(".badge")).to_have_text(["retracted", "active"])
        await expect(page.locator("#error")).to_be_hidden()

        # Writing is the present's: while a past point is read, the forms that add knowledge (and
        # propose a policy) are off, saying why; emptied, the field gives them back, what was typed
        # kept.
        await tabs.get_by_role("button", name="Add knowledge").click()
        fact = view.locator("form").first
        await fact.locator("input[name=content]").fill("backups run at midnight")
        notice = view.locator(".past-writes")
        await expect(notice).to_be_hidden()
        await _ask_as_of(page, str(first), re.compile(rf"^as of seq {first} \("))
        await expect(notice).to_be_visible()
        await expect(notice).to_contain_text("as of a past point")
        await expect(notice).to_contain_text("Empty the as of field to add knowledge")
        for button in ("Propose fact", "Record memory"):
            await expect(view.get_by_role("button", name=button)).to_be_disabled()
        await expect(fact.locator("input[name=content]")).to_be_disabled()
        await _ask_as_of(page, "", "")
        await expect(notice).to_be_hidden()
        await expect(view.get_by_role("button", name="Propose fact")).to_be_enabled()
        await expect(fact.locator("input[name=content]")).to_have_value("backups run at midnight")
        await tabs.get_by_role("button", name="Policies").click()
        await _ask_as_of(page, str(first), re.compile(rf"^as of seq {first} \("))
        await expect(view.get_by_role("button", name="Propose policy")).to_be_disabled()
        await expect(view.locator(".past-writes")).to_contain_text("Empty the as of field to propose")
        await _ask_as_of(page, "", "")
        await expect(view.get_by_role("button", name="Propose policy")).to_be_enabled()
        await expect(page.locator("#error")).to_be_hidden()
