"""The committed OpenAPI document is what the code generates (``make openapi`` rewrites it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from noema.domain.knowledge import DomainRef
from noema_api.openapi import build_openapi, render
from noema_api.routes import ENDPOINTS

COMMITTED = Path(__file__).resolve().parents[2] / "schemas" / "openapi.json"


def test_the_committed_openapi_document_is_up_to_date() -> None:
    assert COMMITTED.read_text() == render(build_openapi(ENDPOINTS)), "stale: run `make openapi`"


def test_every_operation_documents_its_errors_and_names_its_schemas() -> None:
    doc = build_openapi(ENDPOINTS)
    schemas = doc["components"]["schemas"]
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            assert "400" in op["responses"], (method, path)
            if op.get("security") != []:
                assert {"401", "403"} <= set(op["responses"]), (method, path)
            if "requestBody" in op:
                assert "415" in op["responses"], (method, path)
            for status, response in op["responses"].items():
                # Every error is a problem (RFC 9457), but for /readyz's 503, the checks that failed;
                # every answer else is JSON.
                [(media, content)] = response["content"].items()
                ref = content["schema"].get("$ref")
                assert ref is None or ref.rsplit("/", 1)[1] in schemas
                is_problem = ref == "#/components/schemas/Problem"
                assert media == ("application/problem+json" if is_problem else "application/json")
                assert is_problem or int(status) < 400 or (path, status) == ("/readyz", "503")
    ids = [op["operationId"] for methods in doc["paths"].values() for op in methods.values()]
    assert len(ids) == len(set(ids))
    # Readable names for generated clients (listMemories), not ones derived from paths.
    assert all(re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+)+", i) for i in ids), ids
    assert doc["paths"]["/v1/memories"]["get"]["operationId"] == "listMemories"


def test_the_document_names_its_license_and_a_server() -> None:
    doc = build_openapi(ENDPOINTS)
    assert doc["info"]["license"] == {"name": "Apache-2.0", "identifier": "Apache-2.0"}
    assert doc["servers"][0]["url"] == "http://127.0.0.1:8765"
    problem = doc["components"]["schemas"]["Problem"]
    assert set(problem["required"]) == {"type", "title", "status", "detail", "code", "error"}


DOC = build_openapi(ENDPOINTS)


def _query_patterns(path: str, name: str) -> Iterator[str]:
    for param in DOC["paths"][path]["get"]["parameters"]:
        if param["name"] == name:
            yield param["schema"]["pattern"]


def _pattern(schema: str, field: str) -> re.Pattern[str]:
    return re.compile(DOC["components"]["schemas"][schema]["properties"][field]["pattern"])


DOMAIN = _pattern("GrantBody", "domain")
QUALIFIED = re.compile(next(p for p in _query_patterns("/v1/conflicts", "domain")))
NOT_BLANK = _pattern("ReasonBody", "reason")


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=120), st.from_regex(DOMAIN), st.from_regex(QUALIFIED)))
def test_the_documented_domain_patterns_accept_what_the_server_accepts(text: str) -> None:
    def accepted(given: str) -> bool:
        try:
            DomainRef.parse(given)
        except ValueError:
            return False
        return True

    assert bool(QUALIFIED.match(text)) == accepted(text), text
    assert bool(DOMAIN.match(text)) == (accepted(text) and not text.strip().lower().startswith("repo:"))


@settings(deadline=None)
@given(st.text(max_size=50))
def test_the_documented_not_blank_pattern_is_what_python_strips(text: str) -> None:
    assert bool(NOT_BLANK.match(text)) == ("\x00" not in text and bool(text.strip())), repr(text)
