"""Property-based: schemathesis against the committed schemas/openapi.json, on a real server.

The app runs under uvicorn on the test's real NATS + PostgreSQL, authenticated with an
all-workspaces token; schemathesis generates valid and invalid requests for every operation (memory
ids are sometimes those of real memories, so detail and the operator actions are exercised past
their 404) and checks that nothing answers 5xx, every answer matches the document, and no request
the document calls valid is refused (400 or 422): the document declares every rule the server
enforces on input.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.api_harness import ADMIN, ApiHarness, api, memory
from tests.integration.http_support import serving

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spread]
__all__ = ["api"]

OPENAPI = Path(__file__).resolve().parents[2] / "schemas" / "openapi.json"
EXAMPLES = 10
"""Per operation and mode: each operation × 2 × 10 requests, derandomized (the same ones every run).
Most of the time goes into generating the requests, not into answering them: schemathesis
canonicalises an invalid body's schema for each example, and the bodies with a 32,000-character field
(facts, memories, corrections) take most of it. Measured on this machine: generating every case
without sending any took 39 s of CPU at 10 examples and 22 s at 5 (the whole test about 65 s), so the
cost is per example. The checks are the API's (its validation and its answers' shapes), but a 5xx can
also come from PostgreSQL (a value the document lets through that SQL refuses): hence the real
servers, in the slow tier."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
"""On every request, valid or not."""
BODY_CHECKS = [*CHECKS, negative_data_rejection]
"""Invalid data must be refused — checked where it is unambiguous. In a query string the integer 0
generated "where a string is expected" arrives as the text "0", a valid string, so a negative case
there can be a perfectly valid request (seen: ``?domain=0``); unknown and malformed query parameters
are covered by the API's own tests."""
POSITIVE_CHECKS = [positive_data_acceptance]
"""A request the document calls valid is accepted: answered 2xx, or 404 (an id that names nothing),
409 (the record's state does not allow the action) or 401/403 — never 400 or 422, which would mean
the document does not declare a rule the server enforces."""


def _check(
    operation: Any, mode: GenerationMode, base_url: str, session: requests.Session, memory_ids: list[str]
) -> None:
    """Generated requests of one mode against one operation; raises what schemathesis found."""
    positive = mode is GenerationMode.POSITIVE

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the same requests on every run: a failure reproduces
        report_multiple_bugs=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(mode), known=st.sampled_from([None, *memory_ids]))
    def run(case: Any, known: str | None) -> None:
        if known is not None and "memory_id" in (case.path_parameters or {}):
            case.path_parameters["memory_id"] = known
        body_only = case.body is not None and not case.path_parameters and not case.query
        checks = BODY_CHECKS if body_only else CHECKS
        case.call_and_validate(
            base_url=base_url, session=session, checks=[*checks, *POSITIVE_CHECKS] if positive else checks
        )

    try:
        run()
    except Unsatisfiable:
        # Only for invalid input to an operation that takes none (e.g. /healthz).
        assert not positive, operation.label


METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
"""The keys of an OpenAPI path item that are operations."""


def _operations() -> list[tuple[str, str]]:
    """(path, method) of every operation of the document, read as JSON (schemathesis loads it in the
    test): one test per operation, so that pytest-xdist spreads them over its workers."""
    paths = json.loads(OPENAPI.read_text(encoding="utf-8"))["paths"]
    return [(path, method.upper()) for path, item in paths.items() for method in item if method in METHODS]


def property_test(path: str, method: str, base_url: str, memory_ids: list[str]) -> list[str]:
    """One operation of the document, with valid and with invalid input (blocking: run in a thread);
    returns the failures, one text per mode."""
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {ADMIN}"
    operation = schemathesis.openapi.from_path(OPENAPI)[path][method]
    failures: list[str] = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        try:
            _check(operation, mode, base_url, session, memory_ids)
        except (Exception, BaseExceptionGroup) as exc:  # schemathesis groups distinct failures
            failures.append(f"{operation.label} ({mode.value}): {exc}")
    return failures


def test_every_operation_of_the_document_is_tested() -> None:
    """The parametrisation covers what schemathesis finds in the document, no more and no less."""
    found = {r.ok().label for r in schemathesis.openapi.from_path(OPENAPI).get_all_operations()}  # type: ignore[union-attr]
    assert found == {f"{method} {path}" for path, method in _operations()}


@pytest.mark.timeout(900)  # seconds of CPU per operation: minutes of wall-clock time on a shared machine
@pytest.mark.parametrize(
    ("path", "method"), [pytest.param(*op, id=f"{op[1]} {op[0]}") for op in _operations()]
)
async def test_no_generated_request_gets_a_5xx_or_an_answer_outside_the_document(
    api: ApiHarness, path: str, method: str
) -> None:
    ids = await api.given(
        memory("the deploy key rotates on Fridays", domain="ops"),
        memory("Bob keeps the vault credentials", kind="episodic", epistemic_kind="observation"),
        memory("an archived note", workspace="globex"),
    )
    async with serving(api.app) as base_url:
        failures = await asyncio.to_thread(property_test, path, method, base_url, ids)
    assert not failures, "\n\n".join(failures)
