"""One failing call per error kind through every surface — the HTTP API, the NATS agent service and
``noemactl`` — on real NATS and PostgreSQL (the MCP server's: tests/unit/test_mcp_in_memory.py, in
memory), each answer checked against the table of
docs/errors.md (parsed: the document, not the code, is what these tests hold the surfaces to)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from starlette.applications import Starlette
from typer.testing import CliRunner

import noema.runtime.locate
from noema.adapters.asgi import DEFAULT_MAX_BODY
from noema.adapters.jetstream import connect
from noema.adapters.postgres.voices import RecallStore
from noema.application.knowledge import Caller
from noema.composition.instance import Instance, connected_knowledge
from noema.domain.admission import Admission, AdmissionLimits
from noema.errors import Kind
from noema_api.app import create_app
from noema_api.auth import TokenEntry, Tokens
from noema_api.endpoint import Api, Endpoint, Req, routes
from noema_cli.main import app as noemactl
from noema_sdk.protocol import ERROR_CODE_HEADER, agent_subject
from noema_service import operations
from noema_service.service import AgentService
from noema_service.service import build as build_service
from tests.integration.api_harness import ADMIN, ApiHarness, api, memory, retraction
from tests.integration.cli_process import ctl
from tests.support import assert_eventually
from tests.unit.test_errors import Documented, documented

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["api"]  # the fixture, imported for pytest

OPERATOR = Caller("acme", "root", operator=True)
ALICE = Caller("acme", "alice", "engineer")
IVY = Caller("acme", "ivy", "intern")  # may read the security domain, not write it
TABLE = documented()


def one_request_a_while() -> Admission:
    """Limits a second request of a caller is over at once (rate_limited)."""
    return Admission(AdmissionLimits(rate=0.001, burst=1, concurrency=0))


@dataclass(frozen=True)
class World:
    """What the failing calls need: an active memory, two more of one mind, a retracted fact."""

    active: str
    others: tuple[str, str]
    retracted_fact: str


async def world(api: ApiHarness) -> World:
    active, b, c, fact = await api.given(
        memory("the deploy key rotates"),
        memory("b"),
        memory("c"),
        memory("deploys happen on fridays", domain="ops", topic="deploy-day"),
    )
    await api.given(retraction(fact))
    await connected_knowledge(api.h.pool, api.h.nc, api.h.topology).set_grant(
        OPERATOR, "intern", "security", "read"
    )
    await api.caught_up()
    return World(active, (b, c), fact)


def check(seen: dict[Kind, Any], expected: Callable[[Documented], Any]) -> None:
    """Every kind the surface reports answered what the table says."""
    wanted = {kind: expected(row) for kind, row in TABLE.items() if expected(row) is not None}
    assert seen == wanted


async def test_the_http_api_answers_each_kind_with_its_status_and_code(api: ApiHarness) -> None:
    w = await world(api)
    path = f"/v1/memories/{w.active}"
    calls: dict[Kind, Callable[[], Awaitable[httpx.Response]]] = {
        Kind.MALFORMED: lambda: api.admin.get("/v1/memories", params={"bogus": "1"}),
        Kind.INVALID: lambda: api.admin.post(f"{path}/retract", json={"reason": "x", "colour": 1}),
        Kind.UNAUTHENTICATED: lambda: api.anonymous.get("/v1/memories"),
        Kind.FORBIDDEN: lambda: api.acme.get("/v1/memories", params={"workspace": "globex"}),
        Kind.NOT_FOUND: lambda: api.admin.get("/v1/memories/zzzzzzzzzz"),
        Kind.CONFLICT: lambda: api.admin.post(f"{path}/restore", json={"reason": "it is active"}),
        Kind.TOO_LARGE: lambda: api.admin.post(f"{path}/retract", content=b"x" * (DEFAULT_MAX_BODY + 1)),
        Kind.UNSUPPORTED_MEDIA_TYPE: lambda: api.admin.post(
            f"{path}/retract",
            content=b"reason=x",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        ),
    }
    # Unavailable: the same API over a NATS connection that is gone (writes need the bus).
    assert api.h.settings.nats_url
    gone = await connect(api.h.settings.nats_url, name="gone", auth=api.h.settings.nats_auth)
    await gone.close()
    tokens = Tokens([TokenEntry(name="alice", token=ADMIN)])
    down = Api(Instance(api.h.settings, api.h.pool, gone, await RecallStore.open(api.h.pool)), tokens)

    # Internal: a handler with a bug, served by the same endpoint machinery.
    async def bug(req: Req[None, None]) -> Any:
        raise KeyError("secret internals")

    buggy = Starlette(routes=routes([Endpoint("GET", "/v1/bug", bug, "a bug", None, "test")], down))
    # Rate limited: the token's second request, over limits that admit one.
    up = Instance(api.h.settings, api.h.pool, api.h.nc, await RecallStore.open(api.h.pool))
    limited = create_app(Api(up, tokens, one_request_a_while()))
    auth = {"Authorization": f"Bearer {ADMIN}"}
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(down)), base_url="http://x") as d,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=buggy), base_url="http://x") as b,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=limited), base_url="http://x") as r,
    ):
        calls[Kind.UNAVAILABLE] = lambda: d.post(f"{path}/retract", json={"reason": "x"}, headers=auth)
        calls[Kind.INTERNAL] = lambda: b.get("/v1/bug", headers=auth)
        assert (await r.get("/v1/memories", headers=auth)).status_code == 200
        calls[Kind.RATE_LIMITED] = lambda: r.get("/v1/memories", headers=auth)
        answers = {kind: await call() for kind, call in calls.items()}
    assert int(answers[Kind.RATE_LIMITED].headers["Retry-After"]) >= 1
    for kind, res in answers.items():
        assert res.json()["code"] == kind, (kind, res.text)
        assert "secret" not in res.text
    check({kind: res.status_code for kind, res in answers.items()}, lambda row: row.http)


async def test_the_nats_service_answers_each_kind_with_its_error_code(
    api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = await world(api)

    async def bug(app: Instance, who: Caller, raw: bytes) -> Any:
        raise KeyError("secret internals")

    monkeypatch.setitem(
        operations.OPERATIONS,
        "update_my_notes",
        dataclasses.replace(operations.OPERATIONS["update_my_notes"], run=bug),
    )
    service: AgentService = await api.h.start(build_service)

    async def request(who: Caller, op: str, args: dict[str, Any]) -> Msg:
        subject = agent_subject(api.h.topology.prefix, who.workspace, who.role, who.agent, op)
        return await api.h.nc.request(subject, json.dumps(args).encode(), timeout=30)

    async def answering() -> bool:
        # The endpoints' interest may reach the server a moment after build() returns.
        try:
            await request(ALICE, "get_preamble", {"task": ""})
        except NoRespondersError:
            return False
        return True

    await assert_eventually(answering, timeout=20)

    calls: dict[Kind, Callable[[], Awaitable[Msg]]] = {
        Kind.MALFORMED: lambda: request(ALICE, "supersede_fact", {"fact_id": "abc", "content": "x"}),
        Kind.INVALID: lambda: request(ALICE, "search_memory", {"query": "deploys", "limit": 0}),
        Kind.FORBIDDEN: lambda: request(IVY, "propose_policy", {"domain": "security", "rule": "x"}),
        Kind.NOT_FOUND: lambda: request(ALICE, "supersede_fact", {"fact_id": "zzzzzzzzzz", "content": "x"}),
        Kind.CONFLICT: lambda: request(
            ALICE, "supersede_fact", {"fact_id": w.retracted_fact, "content": "x"}
        ),
        Kind.INTERNAL: lambda: request(ALICE, "update_my_notes", {"notes": "x"}),
    }
    answers: dict[Kind, Msg] = {}
    for kind, call in calls.items():
        try:
            answers[kind] = await call()
        except Exception as exc:
            raise AssertionError(f"the {kind} call got no reply") from exc
    # Rate limited: Alice's second request, over limits that admit one.
    service._dispatcher._admission = one_request_a_while()
    await request(ALICE, "get_preamble", {"task": ""})
    answers[Kind.RATE_LIMITED] = limited = await request(ALICE, "get_preamble", {"task": ""})
    assert limited.headers is not None
    assert int(limited.headers["Retry-After"]) >= 1
    service._dispatcher._admission = None
    # Unavailable last: the service's read model goes away (its pool is closed under it).
    await service._dispatcher._app.pool.close()
    answers[Kind.UNAVAILABLE] = await request(ALICE, "search_memory", {"query": "deploys"})
    codes: dict[Kind, Any] = {}
    for kind, reply in answers.items():
        assert reply.headers is not None, kind
        body = json.loads(reply.data)
        assert body["error"]["code"] == int(reply.headers[ERROR_CODE_HEADER]), kind
        assert "secret" not in reply.data.decode()
        codes[kind] = body["error"]["code"]
    check(codes, lambda row: row.nats)


# The MCP server, each kind as the table says: tests/unit/test_mcp_in_memory.py (in memory).


async def test_noemactl_exits_with_each_kinds_code(api: ApiHarness, tmp_path: Path) -> None:
    w = await world(api)
    b, c = w.others
    seen: dict[Kind, int] = {}
    for kind, argv in {
        Kind.MALFORMED: ["audit", "--type", "no.such.event"],
        Kind.INVALID: ["memory", "relate", b, c, "--relation", "likes"],
        Kind.FORBIDDEN: [
            "policy",
            "propose",
            "x",
            "-w",
            "acme",
            "-d",
            "security",
            "-a",
            "ivy",
            "-r",
            "intern",
        ],
        Kind.NOT_FOUND: ["memory", "show", "zzzzzzzzzz"],
        Kind.CONFLICT: ["memory", "restore", w.active, "--reason", "it is active"],
    }.items():
        ran = await ctl(api, *argv, "--json")
        assert json.loads(ran.stderr)["exit_code"] == ran.code, (kind, ran.stderr)
        assert "Traceback" not in ran.stderr
        seen[kind] = ran.code
    # Unavailable: no instance in the data folder, or NATS not answering — never a traceback.
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    nowhere = await _run({**env, "NOEMA_DATA_DIR": str(tmp_path)}, "memory", "list")
    dead_nats = await _run(
        {**env, **api.h.settings.to_env(), "NOEMA_NATS_URL": "nats://127.0.0.1:1"}, "decay-tick"
    )
    assert nowhere.code == dead_nats.code, (nowhere, dead_nats)
    assert "no running Noema" in nowhere.stderr, nowhere
    assert "cannot reach" in dead_nats.stderr, dead_nats
    seen[Kind.UNAVAILABLE] = nowhere.code
    seen[Kind.INTERNAL] = _bug_exit_code()
    check(seen, lambda row: row.cli)


@dataclass(frozen=True)
class _Ran:
    code: int
    stderr: str


async def _run(env: dict[str, str], *argv: str) -> _Ran:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "noema_cli.main", *argv, env=env, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    assert "Traceback" not in err.decode()
    return _Ran(proc.returncode, err.decode())


def _bug_exit_code() -> int:
    """A bug inside a command (here: finding the instance) exits 1 with its traceback shown."""

    def broken(*args: Any, **kw: Any) -> Any:
        raise KeyError("bug")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(noema.runtime.locate, "locate", broken)  # noema_cli.common imports it per command
        result = CliRunner().invoke(noemactl, ["memory", "list"])
    assert isinstance(result.exception, KeyError)
    return result.exit_code
