"""The memory explorer, over the in-memory composition (tests/unit/api_in_memory.py): the page and its
modules are served with a strict policy, every API call it makes is one the committed OpenAPI document
has (so the page cannot drift from the API), it waits for its writes with ``after_seq`` rather than
timers, and it takes its closed lists from the API. Moved from tests/integration/test_api_ui.py with
their assertions kept (the page in a browser over the real servers: tests/e2e/test_explorer_browser.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

from noema.application.search import MODES
from noema_events.vocabulary import (
    CHANNEL_CREDIBILITY,
    EPISTEMIC_KINDS,
    MEMORY_KINDS,
    MEMORY_STATUSES,
    MEMORY_TYPES,
    RELATIONS,
    VERACITIES,
    Access,
)
from tests.unit.api_in_memory import InMemoryApi as ApiHarness
from tests.unit.api_in_memory import api

__all__ = ["api"]

ROOT = Path(__file__).resolve().parents[2]
UI = ROOT / "services" / "noema_api" / "ui"
CALL = re.compile(r"""\bapi\("(GET|POST|PUT|DELETE)",\s*[`"]([^`"]+)[`"]""")
IMPORT = re.compile(r"""^import \{[^}]*\} from "\./([\w.-]+)";$""", re.M)
STRINGS = re.compile(r"""\[\s*"[^"]*"(?:\s*,\s*"[^"]*")+\s*\]""")


def sources() -> dict[str, str]:
    """Every module of the explorer by file name."""
    return {path.name: path.read_text() for path in sorted(UI.glob("*.js"))}


def explorer_calls() -> set[tuple[str, str]]:
    """(method, path template) of every API call in the explorer, path parameters written ``{}``."""
    source = "\n".join(sources().values())
    return {(method, re.sub(r"\$\{[^}]*\}", "{}", path)) for method, path in CALL.findall(source)}


def documented() -> set[tuple[str, str]]:
    spec = json.loads((ROOT / "schemas" / "openapi.json").read_text())
    return {
        (method.upper(), re.sub(r"\{[^}]*\}", "{}", path))
        for path, operations in spec["paths"].items()
        for method in operations
    }


async def test_the_explorer_page_and_its_assets_are_served_with_a_strict_policy(api: ApiHarness) -> None:
    client = api.anonymous  # the files hold no data: no token needed to load the page
    assert (await client.get("/")).headers["location"] == "/ui/"
    page = await client.get("/ui/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy
    assets = re.findall(r'(?:src|href)="(?!data:)([^"]+)"', page.text)
    assert sorted(assets) == ["app.css", "app.js"]
    assert '<script type="module" src="app.js">' in page.text
    modules = sources()
    assert len(modules) > 10  # one module per view, plus the shared ones
    for asset, kind in [*((name, "text/javascript") for name in modules), ("app.css", "text/css")]:
        res = await client.get(f"/ui/{asset}")
        assert res.status_code == 200, asset
        assert res.headers["content-type"].startswith(kind)  # browsers refuse modules of another type
        assert res.headers["x-content-type-options"] == "nosniff"
        assert res.headers["content-security-policy"] == policy
    # Every import names a module the server serves, and every module is reached from app.js.
    reached, todo = set(), ["app.js"]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            imported = IMPORT.findall(modules[name])
            assert set(imported) <= set(modules), (name, set(imported) - set(modules))
            todo += imported
    assert reached == set(modules)
    missing = await client.get("/ui/secrets.json")
    assert missing.status_code == 404
    assert "no explorer file" in missing.json()["error"]
    # The data behind the page still needs a token.
    assert (await client.get("/v1/memories/search", params={"q": "x"})).status_code == 401


def test_every_call_of_the_explorer_is_a_documented_api_operation() -> None:
    calls = explorer_calls()
    assert calls, "no api(...) calls found in the explorer's modules"
    assert calls <= documented(), calls - documented()
    # What requirements §10 asks of the explorer: search with the breakdown, timeline, operator entry,
    # detail with provenance, the "inaccurate" correction, and the facts, policies, conflicts and
    # grants tabs; and why an id is what it is (issue 18), as a timeline.
    assert {
        ("GET", "/v1/memories/search"),
        ("GET", "/v1/timeline"),
        ("POST", "/v1/memories"),
        ("POST", "/v1/facts"),
        ("GET", "/v1/memories/{}"),
        ("POST", "/v1/memories/{}/retract"),
        ("POST", "/v1/memories/{}/correct"),
        ("GET", "/v1/facts"),
        ("GET", "/v1/policies"),
        ("GET", "/v1/conflicts"),
        ("GET", "/v1/grants"),
        ("PUT", "/v1/grants"),
        ("GET", "/v1/why/{}"),
    } <= calls


def test_the_explorer_never_puts_api_data_into_the_page_as_html() -> None:
    # Memory contents are untrusted text: the page builds elements with textContent only.
    source = "\n".join(sources().values())
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in source, sink


def test_the_explorer_asks_in_dialogs_of_its_own_not_the_browsers() -> None:
    # prompt(), confirm() and alert() block the page, cannot be styled or tested like the page, and
    # some embedding browsers suppress them (then an action silently does nothing).
    for name, text in sources().items():
        assert not re.search(r"(?<![\w.])(prompt|confirm|alert)\(", text), name


def test_the_explorer_waits_for_its_writes_by_stream_sequence_not_by_timers() -> None:
    # A write's Noema-Stream-Seq becomes every later read's after_seq; the API holds the read until
    # the projector has applied it (tests/integration/test_api_explorer.py), so nothing sleeps.
    for name, source in sources().items():
        for timer in ("setTimeout", "setInterval", "waitUntil"):
            assert timer not in source, (name, timer)
    client = sources()["api.js"]
    assert 'response.headers.get("Noema-Stream-Seq")' in client
    assert 'query.set("after_seq"' in client
    # The graph view asks for a neighbourhood once, not for every node's detail.
    graph = sources()["graph.js"]
    assert re.findall(r"""api\("GET", `([^`]+)`""", graph) == [
        "/v1/memories/${encodeURIComponent(rootId)}/neighbourhood"
    ]


def test_the_explorer_takes_its_closed_lists_from_the_api_not_from_literals() -> None:
    lists = [MEMORY_KINDS, EPISTEMIC_KINDS, MEMORY_STATUSES, tuple(MEMORY_TYPES), RELATIONS, VERACITIES]
    lists += [tuple(CHANNEL_CREDIBILITY), get_args(Access), MODES]
    for name, source in sources().items():
        for literal in STRINGS.findall(source):
            items = set(re.findall(r'"([^"]*)"', literal))
            for vocabulary in lists:
                assert len(items & set(vocabulary)) < 2, (name, literal)
    assert ("GET", "/v1/vocabulary") in explorer_calls()
