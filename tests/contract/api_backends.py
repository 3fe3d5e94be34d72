"""The operator API over both compositions, for the scenarios written once and run on each: over the
in-memory pipeline (tests/unit/api_in_memory.py, the fast tier) and over the real servers with a
projector running (tests/integration/api_harness.py, marked ``integration``, where PostgreSQL's
row-level security scopes the connection as well as the handlers' checks).

A test asks for ``either_api``; it gets one of :class:`InMemoryApi` and :class:`ApiHarness`, which
offer the same clients (``admin``, ``acme``, ``anonymous``) and seeding (``given``, ``caught_up``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.integration.api_harness import ApiHarness, api
from tests.unit.api_in_memory import InMemoryApi, in_memory_api

__all__ = ["AnyApi", "api", "api_over_servers", "either_api"]

AnyApi = InMemoryApi | ApiHarness


@pytest.fixture(params=["memory", pytest.param("servers", marks=pytest.mark.integration)])
def api_over_servers(request: pytest.FixtureRequest) -> ApiHarness | None:
    """The real servers' API for the ``servers`` half only (a sync fixture: pytest sets the async
    ``api`` up from here, outside the test's event loop)."""
    if request.param == "memory":
        return None
    served: ApiHarness = request.getfixturevalue("api")
    return served


@pytest.fixture
async def either_api(api_over_servers: ApiHarness | None) -> AsyncIterator[AnyApi]:
    """Each scenario once per composition."""
    if api_over_servers is not None:
        yield api_over_servers
        return
    async with in_memory_api() as harness:
        yield harness
