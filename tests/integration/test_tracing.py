"""One trace from a published observation to its memory, through real NATS and PostgreSQL.

The observation is published inside a span of the publisher's own; attend, embed and the projector
run in-process with spans recorded into an in-memory exporter. The trace id must be on every event
made from the observation (their ``traceparent`` headers, also when nothing is recorded) and on the
spans of all three workers, the projector's for the memory's own ``memory.created``. Malformed and
hostile trace headers, on the observation and on the event subjects, are ignored: the messages are
handled as if they had none, and no worker stops.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from noema.adapters import tracing
from noema.adapters.deadletters import DeadLetters
from noema.adapters.jetstream import EventPublisher, read_stream
from noema.client import build_observation, send_observation
from noema.domain.attention import memory_id_for
from noema_attend.service import build as build_attend
from noema_embed.service import build as build_embed
from noema_events import decode_event, encode_event
from noema_projector.service import build as build_projector
from noema_sdk.tracing import trace_id_of
from noema_service.service import AgentService
from tests.conftest import Harness
from tests.integration.api_harness import ApiHarness, api, memory
from tests.integration.test_service import client, pipeline
from tests.support import assert_eventually, memory_created

pytestmark = pytest.mark.integration
__all__ = ["api", "pipeline"]

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = f"00-{TRACE}-b7ad6b7169203331-01"

CYCLE = {"attention.decided", "memory.created", "working_memory.updated", "memory.embedded"}
"""The events one observation's trace must reach (attend's cycle and embed's vector)."""

HOSTILE: list[dict[str, str]] = [
    {"traceparent": "garbage"},
    {"traceparent": "00-" + "0" * 32 + "-" + "1" * 16 + "-01"},  # all-zero trace id
    {"traceparent": "00-" + "A" * 32 + "-" + "1" * 16 + "-01"},  # upper case
    {"traceparent": "ff-" + "a" * 32 + "-" + "1" * 16 + "-01"},  # forbidden version
    {"traceparent": "00-" + "a" * 32 + "-" + "1" * 16 + "-01-extra"},  # version 00 with more
    {"traceparent": "00-" + "a" * 32 + "-" + "1" * 16 + "-01" + "x" * 10_000},
    {"traceparent": "\u00e9\u00e9-\u0000", "tracestate": "k=\u0000" * 3000},
    {"tracestate": "vendor=only-a-state"},
]


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield provider, exporter
    tracing.install(None)
    provider.shutdown()


async def _start_workers(harness: Harness) -> None:
    for build in (build_attend, build_embed, build_projector):
        await harness.start(build)  # a worker that stops fails the test at teardown


async def _events(harness: Harness, embedded: int) -> list[tuple[Any, dict[str, str]]]:
    """Every event on the event stream with its headers, once ``embedded`` memories have their
    ``memory.embedded`` (embed publishes last)."""

    async def stored() -> list[tuple[Any, dict[str, str]]]:
        info = await harness.js.stream_info(harness.topology.event_stream)
        found: list[tuple[Any, dict[str, str]]] = []
        subjects = harness.topology.event_subjects
        async for msgs in read_stream(
            harness.nc, harness.topology.event_stream, subjects, 1, info.state.last_seq
        ):
            found += [(decode_event(m.data), dict(m.headers or {})) for m in msgs]
        return found if sum(ev.name == "memory.embedded" for ev, _ in found) >= embedded else []

    events: list[tuple[Any, dict[str, str]]] = await assert_eventually(
        stored, timeout=60, what="memories embedded"
    )
    return events


async def _projected(harness: Harness, memory_id: str) -> bool:
    sql = "SELECT EXISTS (SELECT 1 FROM memories WHERE id = $1)"
    return bool(await harness.pool.fetchval(sql, memory_id))


@pytest.mark.parametrize("recording", [True, False], ids=["recorded", "not-recorded"])
async def test_one_trace_from_the_observation_to_its_memory(
    harness: Harness, provider: tuple[TracerProvider, InMemorySpanExporter], recording: bool
) -> None:
    tracer_provider, exporter = provider
    if not recording:
        tracing.install(None)  # the default: no exporter, the context is passed on as it came
    await _start_workers(harness)
    with tracer_provider.get_tracer("agent").start_as_current_span("agent turn") as span:
        trace_id = f"{span.get_span_context().trace_id:032x}"
        obs = build_observation("the deploy of api-7 failed on the canary", workspace="acme", mind="ops")
        await send_observation(harness.js, obs, topology=harness.topology)
    memory_id = memory_id_for(obs.id)
    await assert_eventually(lambda: _projected(harness, memory_id), timeout=60, what="the memory projected")

    events = await _events(harness, 1)
    assert {ev.name for ev, _ in events} >= CYCLE
    for ev, headers in events:
        assert trace_id_of(headers) == trace_id, (ev.name, headers)

    if not recording:
        assert [s for s in exporter.get_finished_spans() if s.name.startswith("noema.")] == []
        return
    created = next(ev for ev, _ in events if ev.name == "memory.created")

    async def worker_spans() -> dict[str, list[Any]]:
        spans: dict[str, list[Any]] = {}
        for s in exporter.get_finished_spans():
            spans.setdefault(s.name, []).append(s)
        return spans if {"noema.attend", "noema.embed", "noema.project"} <= spans.keys() else {}

    spans = await assert_eventually(worker_spans, timeout=30, what="spans of attend, embed and projector")
    for name in ("noema.attend", "noema.embed", "noema.project"):
        assert {f"{s.context.trace_id:032x}" for s in spans[name]} == {trace_id}, name
    (attend,) = spans["noema.attend"]
    assert attend.parent.span_id == span.get_span_context().span_id  # the publisher's span
    projected = [s for s in spans["noema.project"] if s.attributes["noema.event.type"] == created.type]
    assert len(projected) == 1
    assert projected[0].parent.span_id == attend.context.span_id  # memory.created came from attend


async def test_malformed_trace_headers_are_ignored_on_every_subject(
    harness: Harness, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    await _start_workers(harness)
    observations = []
    for i, headers in enumerate(HOSTILE):
        obs = build_observation(f"observation {i} with a hostile trace header", workspace="acme", mind="ops")
        subject = harness.topology.observation_subject("acme", "ops")
        await harness.js.publish(subject, encode_event(obs), headers={**headers, "Nats-Msg-Id": obs.id})
        observations.append(obs)
    # The embed and projector subjects: a memory.created published straight on the event stream.
    direct = memory_created(content="a memory with a hostile trace header")
    await harness.js.publish(
        harness.topology.event_subject(direct),
        encode_event(direct),
        headers={**HOSTILE[0], "Nats-Msg-Id": direct.id},
    )
    memories = [memory_id_for(o.id) for o in observations] + [direct.payload.memory_id]

    async def all_projected() -> bool:
        return all([await _projected(harness, m) for m in memories])

    await assert_eventually(all_projected, timeout=60, what="every memory projected")

    events = await _events(harness, len(observations) + 1)
    assert all(trace_id_of(headers) is None and "tracestate" not in headers for _, headers in events)
    assert not [s for s in provider[1].get_finished_spans() if s.name.startswith("noema.")]


async def test_an_operator_request_continues_the_trace_it_came_with(api: ApiHarness) -> None:
    [memory_id] = await api.given(memory("the staging database lives on db-3"))
    traced = {"traceparent": PARENT, "tracestate": "vendor=abc"}
    res = await api.admin.post(f"/v1/memories/{memory_id}/retract", json={"reason": "moved"}, headers=traced)
    assert res.status_code == 202, res.text
    action_id = res.json()["action_event_id"]
    [headers] = [h for ev, h in await _events(api.h, 0) if ev.id == action_id]
    assert (trace_id_of(headers), headers.get("tracestate")) == (TRACE, "vendor=abc")
    await api.caught_up()  # a restore is checked against the read model: the retraction must be in it
    hostile = await api.admin.post(
        f"/v1/memories/{memory_id}/restore", json={"reason": "back"}, headers={"traceparent": "00-zz"}
    )
    assert hostile.status_code == 202, hostile.text
    restored = hostile.json()["action_event_id"]
    assert [trace_id_of(h) for ev, h in await _events(api.h, 0) if ev.id == restored] == [None]


async def test_an_agents_observe_request_continues_its_trace(
    harness: Harness, pipeline: AgentService, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    async with client(harness) as agent:
        with provider[0].get_tracer("agent").start_as_current_span("agent turn") as span:
            receipt = await agent.observe("the canary of api-7 is green again")
    sub = await harness.js.subscribe(
        harness.topology.observation_subject("acme", "alice"), ordered_consumer=True
    )
    msg = await sub.next_msg(timeout=5)
    await sub.unsubscribe()
    assert decode_event(msg.data).id == receipt.observation_id
    assert trace_id_of(msg.headers) == f"{span.get_span_context().trace_id:032x}"
    agent_spans = [s for s in provider[1].get_finished_spans() if s.name == "noema.agent observe"]
    assert [s.parent.span_id for s in agent_spans if s.parent] == [span.get_span_context().span_id]


async def test_a_dead_letter_keeps_the_trace_of_what_was_refused(harness: Harness) -> None:
    await harness.start(build_attend)
    subject = harness.topology.observation_subject("acme", "ops")
    await harness.js.publish(subject, b"{not json", headers={"traceparent": PARENT, "Nats-Msg-Id": "bad-1"})
    await harness.js.publish(subject, b"{not json", headers={"traceparent": "00-zz", "Nats-Msg-Id": "bad-2"})

    async def dead_letters() -> list[dict[str, str]]:
        info = await harness.js.stream_info(harness.topology.dead_letter_stream)
        if info.state.messages < 2:
            return []
        seqs = range(info.state.first_seq, info.state.last_seq + 1)
        return [
            dict((await harness.js.get_msg(harness.topology.dead_letter_stream, s)).headers or {})
            for s in seqs
        ]

    traced, hostile = await assert_eventually(dead_letters, timeout=30, what="both dead-lettered")
    assert trace_id_of(traced) == TRACE
    assert "traceparent" not in hostile

    # Retried (forced: this body still does not decode, and a plain retry refuses it), the
    # observation is published again with its trace.
    dlq = DeadLetters(harness.nc, harness.topology, EventPublisher(harness.nc, harness.topology))
    first = (await harness.js.stream_info(harness.topology.dead_letter_stream)).state.first_seq
    retried = await dlq.retry(first, actor="operator:test", reason="fixed", now=datetime.now(UTC), force=True)
    again = await harness.js.get_msg(harness.topology.observation_stream, retried.stream_seq)
    assert trace_id_of(again.headers) == TRACE
