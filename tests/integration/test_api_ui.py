"""The memory explorer: the page and its assets are served with a strict policy, and every API call
it makes is one the committed OpenAPI document has (so the page cannot drift from the API)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.integration.api_harness import ApiHarness, api

pytestmark = pytest.mark.integration
__all__ = ["api"]

ROOT = Path(__file__).resolve().parents[2]
UI = ROOT / "services" / "noema_api" / "ui"
CALL = re.compile(r"""\bapi\("(GET|POST|PUT|DELETE)",\s*[`"]([^`"]+)[`"]""")


def explorer_calls() -> set[tuple[str, str]]:
    """(method, path template) of every API call in app.js, path parameters written ``{}``."""
    source = (UI / "app.js").read_text()
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
    for asset, kind in [("app.js", "text/javascript"), ("app.css", "text/css")]:
        res = await client.get(f"/ui/{asset}")
        assert res.status_code == 200
        assert res.headers["content-type"].startswith(kind)
        assert res.headers["x-content-type-options"] == "nosniff"
    missing = await client.get("/ui/secrets.json")
    assert missing.status_code == 404
    assert "no explorer file" in missing.json()["error"]
    # The data behind the page still needs a token.
    assert (await client.get("/v1/memories/search", params={"q": "x"})).status_code == 401


def test_every_call_of_the_explorer_is_a_documented_api_operation() -> None:
    calls = explorer_calls()
    assert calls, "no api(...) calls found in app.js"
    assert calls <= documented(), calls - documented()
    # What requirements §10 asks of the explorer: search with the breakdown, timeline, operator entry,
    # detail with provenance, the "inaccurate" correction, and the facts, policies, conflicts and
    # grants tabs.
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
    } <= calls


def test_the_explorer_never_puts_api_data_into_the_page_as_html() -> None:
    # Memory contents are untrusted text: the page builds elements with textContent only.
    source = (UI / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in source, sink
