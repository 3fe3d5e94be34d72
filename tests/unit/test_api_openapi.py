"""The committed OpenAPI document is what the code generates (``make openapi`` rewrites it)."""

from __future__ import annotations

from pathlib import Path

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
            for response in op["responses"].values():
                ref = response["content"]["application/json"]["schema"].get("$ref")
                assert ref is None or ref.rsplit("/", 1)[1] in schemas
    ids = [op["operationId"] for methods in doc["paths"].values() for op in methods.values()]
    assert len(ids) == len(set(ids))
