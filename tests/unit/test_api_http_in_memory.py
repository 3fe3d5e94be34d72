"""HTTP hygiene of the operator API over the in-memory composition (tests/unit/api_in_memory.py), at
the wire where it matters (uvicorn on a port, over the in-memory app): chunked bodies cut off at the
limit, every 401 challenges with ``WWW-Authenticate``, every 405 says which methods the path has, and a
path, query string or body that is not UTF-8 (or not JSON) is a 400 that says so. Moved from
tests/integration/test_api_http.py with their assertions kept; that file keeps the bodies refused
before they are read, over uvicorn on the real servers."""

from __future__ import annotations

import json

import pytest

from noema.adapters.asgi import DEFAULT_MAX_BODY
from noema_api.routes import ENDPOINTS
from tests.integration.api_harness import ADMIN
from tests.integration.http_support import RawAnswer, exchange, serving
from tests.unit.api_in_memory import InMemoryApi as ApiHarness
from tests.unit.api_in_memory import api

__all__ = ["api"]

LIMIT_MESSAGE = "larger than the limit of 1048576 bytes (1 MiB) (set by NOEMA_API_MAX_BODY)"


async def _announced(api: ApiHarness, content_type: str) -> RawAnswer:
    """The answer to a POST that announces a 50 MB body of ``content_type`` and sends none of it."""
    async with serving(api.app) as url:
        return await exchange(
            url,
            [
                "POST /v1/memories HTTP/1.1",
                "Host: noema",
                f"Authorization: Bearer {ADMIN}",
                f"Content-Type: {content_type}",
                f"Content-Length: {50 * 1024 * 1024}",
            ],
        )


async def test_a_chunked_body_is_cut_off_at_the_limit(api: ApiHarness) -> None:
    chunk = b"x" * 65536
    over = DEFAULT_MAX_BODY // len(chunk) + 1  # one chunk past the limit, and the body never ends
    async with serving(api.app) as url:
        answer = await exchange(
            url,
            [
                "POST /v1/memories HTTP/1.1",
                "Host: noema",
                f"Authorization: Bearer {ADMIN}",
                "Content-Type: application/json",
                "Transfer-Encoding: chunked",
            ],
            [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * over,
        )
    assert answer.status == 413
    assert LIMIT_MESSAGE in answer.json()["error"]


async def test_a_body_within_the_limit_is_read_and_judged_on_its_content(api: ApiHarness) -> None:
    entry = {"workspace": "acme", "content": "x" * (DEFAULT_MAX_BODY - 100), "reason": "r"}
    res = await api.admin.post("/v1/memories", content=json.dumps(entry))
    assert res.status_code == 422
    assert "content" in res.json()["error"]
    too_big = {**entry, "content": "x" * DEFAULT_MAX_BODY}
    res = await api.admin.post("/v1/memories", content=json.dumps(too_big))
    assert res.status_code == 413
    assert LIMIT_MESSAGE in res.json()["error"]


@pytest.mark.parametrize("header", [None, "Basic abc", "Bearer wrong-token-0123456789"])
async def test_every_401_challenges_with_www_authenticate(api: ApiHarness, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    for e in ENDPOINTS:
        if e.public:
            continue
        path = e.path.format(**dict.fromkeys(e.path_params, "0123456789abcdef"))
        res = await api.anonymous.request(e.method, path, headers=headers, json={})
        assert res.status_code == 401, (e.method, path)
        challenge = res.headers["www-authenticate"]
        assert challenge.startswith('Bearer realm="noema"'), challenge
        if header and header.startswith("Bearer"):
            assert 'error="invalid_token"' in challenge


async def test_every_405_lists_every_method_of_the_path(api: ApiHarness) -> None:
    methods: dict[str, set[str]] = {}
    for e in ENDPOINTS:
        methods.setdefault(e.path, set()).add(e.method)
    assert any(len(m) > 1 for m in methods.values())  # e.g. GET and POST /v1/facts
    for path, given in methods.items():
        concrete = path.replace("{memory_id}", "0123456789ab").replace("{fact_id}", "0123456789ab")
        concrete = concrete.replace("{policy_id}", "0123456789ab")
        expected = given | ({"HEAD"} if "GET" in given else set())
        for wrong in {"GET", "POST", "PUT", "DELETE", "PATCH"} - given:
            res = await api.admin.request(wrong, concrete)
            assert res.status_code == 405, (wrong, path)
            assert set(res.headers["allow"].split(", ")) == expected, (wrong, path)
            assert "error" in res.json()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"workspace": "acme", "content": "caf\xe9", "reason": "r"}', "UTF-8"),
        (b"\xff\xfe{}", "JSON"),
        (b"workspace=acme&content=x", "JSON"),
        (b"", "empty"),
    ],
)
async def test_a_body_that_is_not_utf8_json_is_a_400_that_says_so(
    api: ApiHarness, body: bytes, says: str
) -> None:
    res = await api.admin.post("/v1/memories", content=body, headers={"Content-Type": "application/json"})
    assert res.status_code == 400
    assert says in res.json()["error"]


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("/v1/memories?workspace=%FF", "not valid UTF-8"),
        ("/v1/memories?workspace=ac%zzme", "malformed percent-encoding"),
        ("/v1/memories?work%FFspace=acme", "not valid UTF-8"),
        ("/v1/memories/search?q=100%", "malformed percent-encoding"),
        ("/v1/memories/%C3%28abcdef", "not valid UTF-8"),
        ("/v1/memories/abc%g1def", "malformed percent-encoding"),
    ],
)
async def test_a_path_or_query_that_is_not_percent_encoded_utf8_is_a_400(
    api: ApiHarness, target: str, says: str
) -> None:
    async with serving(api.app) as url:
        answer = await exchange(
            url,
            [f"GET {target} HTTP/1.1", "Host: noema", f"Authorization: Bearer {ADMIN}", "Connection: close"],
        )
    assert answer.status == 400, answer
    assert says in answer.json()["error"]


async def test_well_encoded_text_in_the_query_still_reads(api: ApiHarness) -> None:
    res = await api.admin.get("/v1/memories/search", params={"q": "café + crème"})
    assert res.status_code == 200
    assert res.json()["query"] == "café + crème"


async def test_a_name_with_a_final_line_break_is_refused_not_a_server_error(api: ApiHarness) -> None:
    # Python's `$` lets "acme\n" through a name's pattern; as a NATS subject token it was a 500.
    entry = {"workspace": "acme\n", "content": "x", "reason": "r"}
    res = await api.admin.post("/v1/memories", json=entry)
    assert res.status_code == 422
    assert "must not end with a line break" in res.json()["error"]
    fact = {"workspace": "acme", "domain": "ops", "topic": "t", "content": "x", "reason": "r"}
    res = await api.admin.post("/v1/facts", json={**fact, "workspace": "acme\n"})
    assert res.status_code == 422
    res = await api.admin.get("/v1/memories", params={"workspace": "acme\n"})
    assert res.status_code == 400
    assert "line break" in res.json()["error"]


async def test_json_bodies_are_read_whatever_their_json_media_type_or_with_none(api: ApiHarness) -> None:
    entry = json.dumps({"workspace": "acme", "content": "ship on Tuesdays", "reason": "policy"}).encode()
    for content_type in ("application/json; charset=utf-8", "application/merge-patch+json", None):
        headers = {"Content-Type": content_type} if content_type else {}
        answer = await api.admin.post("/v1/memories", content=entry, headers=headers)
        if content_type is None:
            assert "content-type" not in answer.request.headers
        assert answer.status_code == 202, (content_type, answer.text)


async def test_every_error_is_a_problem_with_a_stable_code_and_the_old_error_member(api: ApiHarness) -> None:
    answer = await api.admin.get("/v1/memories/zzzzzzzzzz")
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/problem+json"
    body = answer.json()
    assert (body["type"], body["title"], body["status"], body["code"]) == (
        "urn:noema:error:not_found",
        "Not found",
        404,
        "not_found",
    )
    assert body["detail"] == body["error"]
    assert "zzzzzzzzzz" in body["detail"]
    # Routing errors too: a 405 keeps its status in the problem, with the kind malformed.
    wrong = await api.admin.delete("/v1/memories")
    assert (wrong.status_code, wrong.json()["status"], wrong.json()["code"]) == (405, 405, "malformed")


DEEP = b'{"content": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
"""A 10 KB body nested 5,000 levels deep: parsed, it was a RecursionError and a 500."""


@pytest.mark.parametrize(
    "endpoint", [e for e in ENDPOINTS if e.body is not None], ids=lambda e: f"{e.method} {e.path}"
)
async def test_every_route_that_takes_a_body_refuses_one_nested_too_deep_with_a_422(
    api: ApiHarness, endpoint: object
) -> None:
    from noema_api.endpoint import Endpoint

    assert isinstance(endpoint, Endpoint)
    path = endpoint.path
    for name in endpoint.path_params:
        path = path.replace(f"{{{name}}}", "0196f1e2-0000-7000-8000-000000000000")
    res = await api.admin.request(
        endpoint.method, path, content=DEEP, headers={"Content-Type": "application/json"}
    )
    assert res.status_code == 422, res.text
    assert "more than 32 levels deep" in res.json()["error"]
