"""HTTP hygiene of the operator API at the wire, over uvicorn on the real servers: a body declared
larger than the limit, or not JSON by its content type, is refused before it is read. The rest of the
API's HTTP hygiene (chunked bodies, 401 challenges, 405s, UTF-8, media types, problem documents,
nesting) runs over the in-memory composition in tests/unit/test_api_http_in_memory.py."""

from __future__ import annotations

import pytest

from tests.integration.api_harness import ADMIN, ApiHarness, api
from tests.integration.http_support import RawAnswer, exchange, serving

pytestmark = pytest.mark.integration
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


async def test_a_body_declared_larger_than_the_limit_is_refused_before_any_of_it_is_sent(
    api: ApiHarness,
) -> None:
    # 50 MB announced, not one byte sent: only an answer given without reading can arrive.
    answer = await _announced(api, "application/json")
    assert answer.status == 413
    assert answer.headers["content-type"] == "application/problem+json"
    assert LIMIT_MESSAGE in answer.json()["detail"]


async def test_a_body_that_is_not_json_by_its_content_type_is_refused_with_415_before_it_is_read(
    api: ApiHarness,
) -> None:
    # 50 MB announced as text, not one byte sent: only an answer given without reading can arrive.
    answer = await _announced(api, "text/plain; charset=utf-8")
    assert answer.status == 415
    problem = answer.json()
    assert answer.headers["content-type"] == "application/problem+json"
    assert problem == {
        "type": "urn:noema:error:unsupported_media_type",
        "title": "Unsupported media type",
        "status": 415,
        "detail": "the body is text/plain: send JSON, with Content-Type: application/json",
        "code": "unsupported_media_type",
        "error": problem["detail"],
    }


DEEP = b'{"content": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
"""A 10 KB body nested 5,000 levels deep: parsed, it was a RecursionError and a 500."""
