"""Admission control on the agent service (issue 28, item 5), on real NATS and PostgreSQL: one agent
floods hybrid searches at 10 times its rate limit, and another agent's searches keep their latency.

The scenario is the benchmark's (:func:`bench.admission.flood`): rounds alternate the quiet agent
alone and beside the flood, so the shared machine's own load drifts into both alike, and what is
compared is a ratio measured in the same run. The issue's bar — the quiet agent's p99 under the flood
within 2x its p99 alone — is held beside the counts that do not depend on speed at all: none of the
quiet agent's searches refused, the flooding agent served no more than its bucket holds, the rest
refused with 429 and counted in the service's metrics. Without admission control the flood puts
~2 s of work a second onto two cores and the quiet agent's p99 grows 6-23 times
(``python -m bench.admission`` runs that baseline too).
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
ATTEMPTS = 3
"""The latency bar is met in one attempt of at most this many: on a shared machine another
process's burst can land in the flood's rounds and not in the quiet ones. Without admission control
the ratio is 6-23 (bench/admission.py's baseline, docs/benchmarks.md), so the best of three still
tells the two apart; the counts are held in every attempt."""


async def test_an_agent_flooding_at_ten_times_its_limit_leaves_another_agents_searches_their_latency(
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

    ratios = []
    for _ in range(ATTEMPTS):
        run = await flood(harness.nc, harness.topology.prefix, LIMIT, rounds=6, per_round=5)
        figures = run.figures()
        print(f"ADMISSION-FIGURES {figures}")
        checks = run.checks(int(LIMIT))
        # What does not depend on the machine's speed holds in every attempt.
        assert checks["quiet_never_refused"], figures
        assert checks["flood_served_within_its_bucket"], figures
        assert checks["flood_refused_the_rest"], figures
        assert figures["flood_refused"] >= 0.8 * figures["flood_sent"], figures
        assert figures["flood_other"] == 0, figures
        ratios.append(figures["quiet_p99_flooded_vs_alone"])
        if checks["quiet_p99_within_2x_under_flood"]:
            break
    metrics = service._dispatcher._app.metrics
    refused = sum(
        sample.value
        for family in metrics.requests_refused.collect()
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels["surface"] == "service"
    )
    assert refused >= figures["flood_refused"]
    assert min(ratios) <= 2.0, f"quiet's p99 under the flood / alone, in each attempt: {ratios}"
