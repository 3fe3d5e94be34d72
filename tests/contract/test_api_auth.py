"""Operator tokens, over both compositions (tests/contract/api_backends.py): no token or a wrong one
is 401, and a workspace token reads only its workspace — over the real servers PostgreSQL's row-level
security scopes the connection as well as the handlers' checks. Written once, from the copies that
were in tests/integration/test_api_auth.py and tests/unit/test_api_auth_in_memory.py (assertions
kept). The other token rules run in memory only, in tests/unit/test_api_auth_in_memory.py."""

from __future__ import annotations

import pytest

from tests.contract.api_backends import AnyApi, api, api_over_servers, either_api
from tests.integration.api_harness import memory

__all__ = ["api", "api_over_servers", "either_api"]


MISSING = ("missing token: send `Authorization: Bearer <token>`", 'Bearer realm="noema"')
MALFORMED = (
    "malformed Authorization header: expected `Bearer <token>`",
    'Bearer realm="noema", error="invalid_request"',
)
INVALID = ("invalid token", 'Bearer realm="noema", error="invalid_token"')


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, MISSING),
        ("Bearer wrong-token-0123456789", INVALID),
        ("Basic abc", MALFORMED),
        ("Bearer ", MALFORMED),
    ],
)
async def test_a_missing_or_invalid_token_is_refused_with_401(
    either_api: AnyApi, header: str | None, expected: tuple[str, str]
) -> None:
    api = either_api
    headers = {"Authorization": header} if header is not None else {}
    error, challenge = expected
    for method, path in [("GET", "/v1/memories"), ("GET", "/v1/audit"), ("POST", "/v1/memories/x/retract")]:
        res = await api.anonymous.request(method, path, headers=headers, json={"reason": "r"})
        assert res.status_code == 401, (method, path)
        assert res.json()["error"] == error, (method, path)
        assert res.headers["WWW-Authenticate"] == challenge, (method, path)


async def test_a_workspace_token_reads_only_its_workspace(either_api: AnyApi) -> None:
    api = either_api
    ours, theirs = await api.given(memory("ours"), memory("theirs", workspace="globex"))
    listed = (await api.acme.get("/v1/memories")).json()["items"]
    assert [m["id"] for m in listed] == [ours]
    assert (await api.acme.get(f"/v1/memories/{ours}")).status_code == 200
    for path, params in [
        (f"/v1/memories/{theirs}", {}),
        ("/v1/memories", {"workspace": "globex"}),
        ("/v1/memories/search", {"q": "theirs", "workspace": "globex"}),
        ("/v1/timeline", {"workspace": "globex"}),
        ("/v1/audit", {"workspace": "globex"}),
    ]:
        res = await api.acme.get(path, params=params)
        assert res.status_code == 403, path
        assert "scoped to workspace 'acme'" in res.json()["error"]
    audit = (await api.acme.get("/v1/audit")).json()["items"]
    assert {e["workspace"] for e in audit} == {"acme"}
