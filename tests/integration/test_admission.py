"""Admission control on the agent service (issue 28, item 5), on real NATS and PostgreSQL: one agent
floods hybrid searches at 10 times its rate limit, and another agent's searches are all served.

The scenario is the benchmark's (:func:`bench.admission.flood`): rounds alternate the quiet agent
alone and beside the flood. What is checked here does not depend on the machine's speed: none of the
quiet agent's searches refused, the flooding agent served no more than its bucket holds, the rest
refused with 429 and counted in the service's metrics. The latency bar — the quiet agent's p99 under
the flood within 2x its p99 alone — is a speed, so ``python -m bench.admission`` measures it (with
and without admission control, as a ratio in the same run; its ``checks``, docs/benchmarks.md), not
this test: held to it, this test took up to three attempts (146 s on a loaded run) and failed when
another process's burst landed in the flood's rounds.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from bench.admission import flood, seed

from noema.adapters.postgres.roles import DbRole
from noema_projector.service import build as build_projector
from noema_service.service import AgentService
from noema_service.service import build as build_service
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

LIMIT = 2.0
"""Requests a second each agent may make (and its burst)."""
MEMORIES = 300


async def test_an_agent_flooding_at_ten_times_its_limit_is_refused_and_another_agents_searches_are_served(
    harness: Harness, role_urls: dict[DbRole, str]
) -> None:
    harness.settings = replace(
        harness.settings,
        database_url_projector=role_urls["projector"],
        database_url_reader=role_urls["reader"],
        rate_limit=LIMIT,
        rate_burst=int(LIMIT),
        concurrency_limit=2,
    )
    await harness.start(build_projector)
    service: AgentService = await harness.start(build_service)
    await seed(harness.nc, harness.topology.prefix, MEMORIES)

    async def projected() -> bool:
        return int(await harness.pool.fetchval("SELECT count(*) FROM memories")) >= MEMORIES

    await assert_eventually(projected, timeout=120)

    run = await flood(harness.nc, harness.topology.prefix, LIMIT, rounds=3, per_round=5)
    figures = run.figures()
    print(f"ADMISSION-FIGURES {figures}")
    checks = run.checks(int(LIMIT))
    assert checks["quiet_never_refused"], figures
    assert checks["flood_served_within_its_bucket"], figures
    assert checks["flood_refused_the_rest"], figures
    assert figures["flood_refused"] >= 0.8 * figures["flood_sent"], figures
    assert figures["flood_other"] == 0, figures
    metrics = service._dispatcher._app.metrics
    refused = sum(
        sample.value
        for family in metrics.requests_refused.collect()
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels["surface"] == "service"
    )
    assert refused >= figures["flood_refused"]
