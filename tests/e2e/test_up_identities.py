"""The shipped identities on a running ``noemactl up``: every worker does its work with the
permissions of its row (noema.runtime.identities) and the server refuses none of it; an erasure
through the API — whose identity may not delete an observation — still deletes the erased
observation (the projector does, applying the erasure)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from noema.adapters.erasure_streams import scan
from noema_sdk import NoemaClient
from noema_sdk.errors import NotFound
from tests.faults.instance import NOEMACTL, Instance, eventually, running

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

MARKER = "zqxident5150"
PERSON = "person:5150"


@pytest.fixture
async def instance(request: pytest.FixtureRequest) -> AsyncIterator[Instance]:
    async with running(request, {}) as inst:
        yield inst


def _violations(instance: Instance) -> list[str]:
    """The server's permission refusals (nats.log), any identity's."""
    text = "".join(p.read_text(errors="replace") for p in instance.data_dir.glob("nats*.log"))
    return re.findall(r".*(?:Publish|Subscription) Violation.*", text)


async def _stored(instance: Instance, needle: str) -> int:
    assert instance.nc is not None
    t = instance.topology
    return sum(
        [
            needle.encode() in m.data
            async for m in scan(instance.nc, t.observation_stream, t.observation_subjects)
        ]
    )


async def test_workers_run_within_their_rows_and_an_api_erasure_deletes_the_observation(
    instance: Instance,
) -> None:
    text = f"{MARKER}: Ann's phone number is 555-0199"
    assert instance.ctl("observe", text, "-w", "acme", "-m", "ops", "--subject", PERSON).returncode == 0
    assert (
        instance.ctl("observe", "the deploy key rotates on Fridays", "-w", "acme", "-m", "ops").returncode
        == 0
    )
    assert instance.pool is not None
    pool = instance.pool

    async def embedded() -> bool:  # attend, the projector and embed each did their part
        return bool(
            await pool.fetchval(
                "SELECT count(*) = 2 FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id "
                "WHERE m.workspace = 'acme'"
            )
        )

    await eventually(embedded, 300, 1.0, "both memories embedded")
    found = instance.ctl("memory", "search", MARKER, "-w", "acme", "--json")
    assert MARKER in found.stdout
    await instance.settle()
    assert await _stored(instance, MARKER) == 1

    token = subprocess.run(
        [*NOEMACTL, "api", "token"], env=instance.env(), capture_output=True, text=True, check=True
    ).stdout.strip()
    body = {"workspace": "acme", "scope": "subject", "target": PERSON, "reason": "request 5150"}
    async with httpx.AsyncClient(base_url=instance.state()["api_url"], timeout=120) as api:
        erased = await api.post("/v1/erasures", json=body, headers={"Authorization": f"Bearer {token}"})
    assert erased.status_code == 200, erased.text
    report = erased.json()
    assert report["keys_destroyed"] is True
    assert len(report["observation_ids"]) == 1
    assert report["observations_deleted"] == 0  # not the API's to delete: the projector's

    async def deleted() -> bool:
        return await _stored(instance, MARKER) == 0

    await eventually(deleted, 60, 0.5, "the projector deleted the erased observation")
    assert await _stored(instance, "the deploy key rotates") == 1  # nothing else
    await _an_agent_uses_its_write_tools(instance)
    status = instance.ctl("status", "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    assert json.loads(status.stdout)
    assert _violations(instance) == []


async def _an_agent_uses_its_write_tools(instance: Instance) -> None:
    """Through the agent service (its identity's row): every tool that publishes an event."""
    added = instance.ctl("agent", "add", "-w", "acme", "-a", "alice", "-r", "engineer", "--json")
    assert added.returncode == 0, added.stderr
    creds = json.loads(added.stdout)
    async with NoemaClient.connect(
        creds["url"],
        user=creds["user"],
        password=creds["password"],
        workspace="acme",
        agent="alice",
        role="engineer",
    ) as alice:
        fact = await alice.propose_fact(domain="infra", topic="db", content="the database is in Frankfurt")
        await _once_projected(lambda: alice.supersede_fact(fact.memory_id, "in Dublin", reason="moved"))
        policy = await alice.propose_policy(domain="infra", rule="deploy on Tuesdays")
        await _once_projected(lambda: alice.supersede_policy(policy.policy_id, "Wednesdays", reason="moved"))
        await alice.remember(session="s1", content="the on-call rota is in the wiki")
        await alice.record_observation("halfway through the migration")
        await alice.update_my_notes("next: the cache")
        await alice.harmonize_memory(domain="infra")
        await alice.consolidate_memory(domain="infra", stale_after_hours=0.0)


async def _once_projected(call: Callable[[], Awaitable[object]]) -> None:
    """``call`` once what it names is in the read model (a write is projected moments later)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            await call()
            return
        except NotFound:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
