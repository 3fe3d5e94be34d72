"""The SDK against the embedded NATS's authorization: a request the server refuses for permissions
raises PermissionDenied as soon as the server says so (not RequestTimeout after the timeout), and
the refusal is logged once on the ``noema_sdk`` logger, without nats-py's traceback."""

from __future__ import annotations

import logging
import time

import pytest

from noema_sdk import NoemaClient, PermissionDenied
from noema_service.service import build as build_service
from tests.conftest import Harness, Servers
from tests.integration.test_nats_auth import _add_agent, _plain

pytestmark = pytest.mark.integration


async def test_a_request_nats_refuses_raises_permission_denied_at_once_and_is_logged_without_traceback(
    servers: Servers, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    await harness.start(build_service)
    alice = await _add_agent(servers, harness, "acme", "alice", "engineer")
    caplog.set_level(logging.DEBUG)
    async with NoemaClient.connect(
        _plain(servers),
        user=alice.user,
        password=alice.password,
        workspace="acme",
        agent="alice",
        role="admin",  # a role her credentials do not allow
        prefix=harness.topology.prefix,
        timeout=30,
    ) as noema:
        started = time.monotonic()
        with pytest.raises(PermissionDenied, match=r"^search_memory: the NATS server refused") as refused:
            await noema.search_memory("secrets", mode="keyword")
        assert time.monotonic() - started < 15, "raised when refused, not after the 30 s timeout"
        assert refused.value.code == 403
        assert "role 'admin'" in str(refused.value)
    warnings = [r for r in caplog.records if r.name == "noema_sdk"]
    assert any("permissions violation" in r.getMessage().lower() for r in warnings), warnings
    assert not [r for r in caplog.records if r.exc_info], "no traceback logged (nats-py's default callback)"
