"""Every identity, on a real nats-server configured as `noemactl up` configures it (unpartitioned,
and with the deploy manifests' four partitions), tries everything
in a fixed list of actions — publishing each event type, observations, dead letters, heartbeats,
every JetStream API call on every stream and every worker's durable consumer, subscribing to
others' subjects — and may do exactly what its row says (restated here, independently of
noema.runtime.identities: widening a row there fails this test, and
``test_a_widened_row_is_caught`` shows it does).

The server holds no stream: an allowed JetStream call answers an error (nothing to act on), a
refused one is a permission violation the server reports; the actions change nothing either way.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import typing
from collections.abc import Iterator
from pathlib import Path

import nats
import nats.js.errors
import pytest
from nats.aio.client import Client as NATS
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from noema.adapters.jetstream import connect, ensure_streams
from noema.runtime import identities
from noema.runtime.credentials import CredentialStore
from noema.runtime.embedded import EmbeddedNats
from noema.runtime.identities import OPERATOR, SERVICES, Row, inbox_prefix
from noema.topology import Topology
from noema_events import AnyEvent
from tests.support import assert_eventually

pytestmark = pytest.mark.integration

PREFIX = "rows"
T = Topology(PREFIX)
P = PREFIX
EVENTS = sorted(t.__struct_config__.tag.rsplit(".", 1)[0] for t in typing.get_args(AnyEvent))
OBS, EVT, DLQ = T.observation_stream, T.event_stream, T.dead_letter_stream
HEALTH, VECTORS = T.health_stream, T.vector_stream
STREAMS = (OBS, EVT, DLQ, HEALTH, VECTORS)
DURABLES = {"attend": OBS, "retrieve": OBS, "projector": EVT, "embed": EVT, "conflicts": EVT}
WORKSPACE, MIND, AGENT, ROLE = "acme", "ops", "alice", "engineer"
PARTITIONED = {"attend": OBS, "conflicts": EVT}
DEPLOYED = 4
"""The partition count of the partitioned server (the deploy manifests'); its workers' consumers
are ``<durable>_4_<p>``, and ``<durable>_5_0`` is a larger count's (the operator's to delete)."""


def partition_durables(worker: str, count: int) -> list[str]:
    return [Topology(PREFIX, count).partitioned_durable(worker, p) for p in range(count)]


def evt(name: str) -> str:
    return f"{P}.evt.{WORKSPACE}.{MIND}.{name.replace('.', '_')}"


def _publish_universe() -> list[str]:
    """Every subject an identity tries to publish on."""
    out = [evt(e) for e in EVENTS]
    out += [f"{P}.obs.{WORKSPACE}.{MIND}", f"{P}.obs.{WORKSPACE}.{MIND}.recall", f"{P}.obs.other.{AGENT}"]
    out += [f"{P}.obs.{WORKSPACE}.{AGENT}", f"{P}.agent.{WORKSPACE}.{ROLE}.{AGENT}.search_memory"]
    out += [f"{P}.agent.{WORKSPACE}.admin.{AGENT}.search_memory", f"{P}.dlq.other"]
    out += [f"{P}.dlq.{name}" for name in SERVICES]
    out += [f"$KV.{T.health_bucket}.{name}.i1" for name in (*SERVICES, OPERATOR)]
    out += [T.vector_subject("k1"), "$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST"]
    for s in STREAMS:
        for verb in ("CREATE", "UPDATE", "DELETE", "PURGE", "INFO", "MSG.DELETE", "MSG.GET"):
            out.append(f"$JS.API.STREAM.{verb}.{s}")
        out += [f"$JS.API.CONSUMER.CREATE.{s}", f"$JS.API.DIRECT.GET.{s}", f"$JS.API.DIRECT.GET.{s}.x"]
        out += [f"$JS.API.CONSUMER.DELETE.{s}.someone", f"$JS.API.CONSUMER.LIST.{s}"]
        out.append(f"$JS.API.CONSUMER.NAMES.{s}")
    for s, d in _consumer_names():
        for verb in ("CREATE", "DURABLE.CREATE", "DELETE", "INFO", "MSG.NEXT"):
            out.append(f"$JS.API.CONSUMER.{verb}.{s}.{d}")
        out += [f"$JS.API.CONSUMER.CREATE.{s}.{d}.{P}.obs.>", f"$JS.ACK.{s}.{d}.1.1.1.1.1"]
    return out


def _consumer_names() -> list[tuple[str, str]]:
    """(stream, name) of every worker's durable consumer, unpartitioned and partitioned."""
    out = [(s, T.durable(worker)) for worker, s in DURABLES.items()]
    for worker, s in PARTITIONED.items():
        out += [(s, d) for count in (DEPLOYED, DEPLOYED + 1) for d in partition_durables(worker, count)]
    return out


SUBSCRIBE_UNIVERSE = [
    ">",
    f"{P}.evt.>",
    f"{P}.obs.>",
    f"{P}.dlq.>",
    f"{P}.agent.>",
    "$SRV.>",
    "$JS.API.>",
    "_INBOX.someone-else.>",
]


def _common(name: str, partitions: int) -> set[str]:
    """What every service process may do: the streams' info and attend's consumers' (status),
    the heartbeats read with an ephemeral consumer, its own heartbeat and dead letters."""
    attend = partition_durables("attend", partitions) if partitions > 1 else [T.durable("attend")]
    return {
        *(f"$JS.API.STREAM.INFO.{s}" for s in STREAMS),
        *(f"$JS.API.CONSUMER.INFO.{OBS}.{d}" for d in attend),
        f"$JS.API.CONSUMER.CREATE.{HEALTH}",
        f"$JS.API.CONSUMER.DELETE.{HEALTH}.someone",
        f"$KV.{T.health_bucket}.{name}.i1",
        f"{P}.dlq.{name}",
    }


def _own_consumer(worker: str, d: str | None = None) -> set[str]:
    s, d = DURABLES[worker], d or T.durable(worker)
    return {
        f"$JS.API.CONSUMER.CREATE.{s}.{d}",
        f"$JS.API.CONSUMER.CREATE.{s}.{d}.{P}.obs.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.{d}",
        f"$JS.API.CONSUMER.INFO.{s}.{d}",
        f"$JS.API.CONSUMER.MSG.NEXT.{s}.{d}",
        f"$JS.ACK.{s}.{d}.1.1.1.1.1",
    }


EVENTS_READ = {f"$JS.API.STREAM.MSG.GET.{EVT}", f"$JS.API.DIRECT.GET.{EVT}", f"$JS.API.DIRECT.GET.{EVT}.x"}
VECTOR_CACHE = {T.vector_subject("k1"), f"$JS.API.DIRECT.GET.{VECTORS}.x"}
AGENT_EVENTS = {
    "fact.proposed",
    "fact.mentioned",
    "memory.superseded",
    "conflict.recorded",
    "policy.proposed",
    "policy.superseded",
    "memory.created",
    "notes.updated",
    "operator.action",
    "domain.created",
    "grant.changed",
}


def _partitioned(worker: str, partitions: int) -> set[str]:
    """What a partitioned worker may do on its stream besides its unpartitioned row: its partitions'
    consumers; any consumer's info, the names and list, message get; deleting its own consumers of
    this and every smaller count (by name), never a larger count's."""
    if partitions == 1:
        return set()
    s = PARTITIONED[worker]
    own = {T.durable(worker)} | {
        d for count in range(2, partitions + 1) for d in partition_durables(worker, count)
    }
    return {
        *(x for d in partition_durables(worker, partitions) for x in _own_consumer(worker, d)),
        *(f"$JS.API.CONSUMER.INFO.{s}.{d}" for stream, d in _consumer_names() if stream == s),
        f"$JS.API.CONSUMER.NAMES.{s}",
        f"$JS.API.CONSUMER.LIST.{s}",
        f"$JS.API.STREAM.MSG.GET.{s}",
        *(f"$JS.API.CONSUMER.DELETE.{s}.{d}" for d in own),
    }


def _services_expected(partitions: int) -> dict[str, set[str]]:
    """Each service's row, restated: what it may publish in the universe beside :func:`_common`."""
    any_obs = {f"{P}.obs.{WORKSPACE}.{MIND}", f"{P}.obs.other.{AGENT}", f"{P}.obs.{WORKSPACE}.{AGENT}"}
    return {
        "attend": {
            *(
                evt(e)
                for e in (
                    "attention.decided",
                    "memory.created",
                    "memory.retrieved",
                    "working_memory.updated",
                    "relationship.added",
                )
            ),
            *_own_consumer("attend"),
            f"$JS.API.CONSUMER.DELETE.{OBS}.{T.durable('attend')}",
            *EVENTS_READ,
            *_partitioned("attend", partitions),
        },
        "retrieve": {f"{P}.obs.{WORKSPACE}.{MIND}.recall", *_own_consumer("retrieve"), *VECTOR_CACHE},
        "projector": {
            *_own_consumer("projector"),
            f"$JS.API.CONSUMER.DELETE.{EVT}.{T.durable('projector')}",
            # Applying a recorded erasure: the erased observations it names, each checked.
            f"$JS.API.STREAM.MSG.GET.{OBS}",
            f"$JS.API.STREAM.MSG.DELETE.{OBS}",
        },
        "embed": {evt("memory.embedded"), *_own_consumer("embed"), *VECTOR_CACHE},
        "decay": {evt("activation.decayed"), *EVENTS_READ},
        "conflicts": {
            *(evt(e) for e in ("conflict.recorded", "fact.mentioned", "memory.superseded")),
            *_own_consumer("conflicts"),
            *EVENTS_READ,
            *_partitioned("conflicts", partitions),
        },
        "api": {
            *(evt(e) for e in (*AGENT_EVENTS, "workspace.configured", "content.erased")),
            *any_obs,
            f"{P}.obs.{WORKSPACE}.{MIND}.recall",  # re-publishing a dead letter where it came from
            *EVENTS_READ,
            *(f"$JS.API.CONSUMER.INFO.{s}.{d}" for s, d in _consumer_names()),
            f"$JS.API.STREAM.MSG.GET.{DLQ}",
            f"$JS.API.DIRECT.GET.{DLQ}",
            f"$JS.API.DIRECT.GET.{DLQ}.x",
            f"$JS.API.STREAM.MSG.DELETE.{DLQ}",
            *(f"$JS.API.CONSUMER.CREATE.{s}" for s in (OBS, EVT, DLQ)),
            # Its readers' ephemeral consumers have names the server picks, so it may pull from
            # any consumer of those streams (a worker's too: never ack, delete or re-configure one).
            *(f"$JS.API.CONSUMER.MSG.NEXT.{s}.{d}" for s, d in _consumer_names()),
            f"$JS.API.STREAM.PURGE.{VECTORS}",  # an erasure empties the vector cache
        },
        "service": {*(evt(e) for e in AGENT_EVENTS), *any_obs, *EVENTS_READ},
        "mcp": {*(evt(e) for e in AGENT_EVENTS), *any_obs, *EVENTS_READ},
    }


def _operator_refused() -> set[str]:
    """The operator may publish anything in the universe but these: deleting or purging a stream
    that is not the dead letters' (or purging that one), deleting an event, a services' heartbeat."""
    return {
        *(f"$JS.API.STREAM.DELETE.{s}" for s in (OBS, EVT, HEALTH, VECTORS)),
        *(f"$JS.API.STREAM.PURGE.{s}" for s in (OBS, EVT, DLQ, HEALTH)),
        *(f"$JS.API.STREAM.MSG.DELETE.{s}" for s in (EVT, HEALTH, VECTORS)),
        *(f"$KV.{T.health_bucket}.{name}.i1" for name in SERVICES),
        # It creates consumers by name (nats-py's form for a name), not by the older durable form.
        *(f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.{d}" for s, d in _consumer_names()),
    }


def expected_publish(name: str, partitions: int = 1) -> set[str]:
    """The subjects of the universe identity ``name`` may publish on (``agent``: alice's)."""
    universe = set(_publish_universe())
    if name == "agent":
        return {f"{P}.obs.{WORKSPACE}.{AGENT}", f"{P}.agent.{WORKSPACE}.{ROLE}.{AGENT}.search_memory"}
    if name == OPERATOR:
        return universe - _operator_refused()
    return (_common(name, partitions) | _services_expected(partitions)[name]) & universe


def expected_subscribe(name: str) -> set[str]:
    if name == OPERATOR:
        return set(SUBSCRIBE_UNIVERSE)
    if name == "service":
        return {f"{P}.agent.>", "$SRV.>"}
    return set()


class Violations:
    """The permission violations the server reported to one connection, by subject."""

    def __init__(self) -> None:
        self.publish: set[str] = set()
        self.subscribe: set[str] = set()

    async def record(self, exc: Exception) -> None:
        # nats-py reports the server's error lower-cased: subjects are compared lower-cased too (no
        # two subjects of the universe differ only in case).
        text = str(exc).lower()
        if "permissions violation" not in text or '"' not in text:
            return
        subject = text.split('"')[1]
        (self.subscribe if "subscription" in text else self.publish).add(subject)

    def refused(self, subjects: list[str], *, subscribe: bool = False) -> set[str]:
        seen = self.subscribe if subscribe else self.publish
        return {s for s in subjects if s.lower() in seen}


def _start(folder: Path, partitions: int = 1) -> EmbeddedNats:
    CredentialStore(folder).add_agent(WORKSPACE, AGENT, ROLE, PREFIX)
    server = EmbeddedNats(folder, prefix=PREFIX, partitions=partitions)
    server.start()
    return server


@pytest.fixture(scope="module", params=[1, DEPLOYED], ids=["unpartitioned", "partitioned"])
def rows_server(request: pytest.FixtureRequest) -> Iterator[EmbeddedNats]:
    folder = Path(tempfile.mkdtemp(prefix="noema-rows-", dir="/tmp"))
    server = _start(folder, request.param)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


async def _connect(server: EmbeddedNats, name: str, violations: Violations) -> NATS:
    if name == "agent":
        record = CredentialStore(server.data_dir).agents()[0]
        return await nats.connect(
            server.url,
            user=record.user,
            password=record.password,
            inbox_prefix=inbox_prefix(record.user),
            allow_reconnect=False,
            error_cb=violations.record,
        )
    return await connect(server.url_for(name), name=f"rows-{name}", error_cb=violations.record)


SENTINEL = f"$JS.API.STREAM.PURGE.{EVT}"
"""Refused to every identity (no one may purge the event stream)."""


async def _seen(violations: Violations, subject: str) -> bool:
    return bool(violations.refused([subject]))


async def mismatches(server: EmbeddedNats, name: str) -> list[str]:
    """Each action of the universe whose outcome for ``name`` is not the one its row states."""
    violations = Violations()
    nc = await _connect(server, name, violations)
    try:
        publish = _publish_universe()
        for subject in publish:
            await nc.publish(subject, b"")
        for subject in SUBSCRIBE_UNIVERSE:
            await nc.subscribe(subject)
        # The server reports violations in order, but the client may see them after a flush's
        # answer: the last action is one refused to everyone, and once its violation is in, all are.
        await nc.publish(SENTINEL, b"")
        await assert_eventually(lambda: _seen(violations, SENTINEL), timeout=10)
    finally:
        await nc.close()
    allowed = set(publish) - violations.refused(publish)
    subscribed = set(SUBSCRIBE_UNIVERSE) - violations.refused(SUBSCRIBE_UNIVERSE, subscribe=True)
    want, want_sub = expected_publish(name, server.topology.partitions), expected_subscribe(name)
    return sorted(
        [f"publish {s}: allowed outside the row" for s in allowed - want]
        + [f"publish {s}: refused inside the row" for s in want - allowed]
        + [f"subscribe {s}: allowed outside the row" for s in subscribed - want_sub]
        + [f"subscribe {s}: refused inside the row" for s in want_sub - subscribed]
    )


@pytest.mark.parametrize("name", [*SERVICES, OPERATOR, "agent"])
async def test_each_identity_may_do_exactly_its_row(rows_server: EmbeddedNats, name: str) -> None:
    assert await mismatches(rows_server, name) == []


WIDENINGS = {
    "api may delete an observation": ("api", "jetstream", "erase_observations"),
    "api publishes attention.decided": ("api", "events", "attention.decided"),
    "embed publishes memory.created": ("embed", "events", "memory.created"),
    "mcp publishes on recall subjects": ("mcp", "observations", "all"),
}


@pytest.mark.parametrize("widening", list(WIDENINGS))
async def test_a_widened_row_is_caught(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, widening: str
) -> None:
    """Widen one row in identities.py (as a careless edit would) and the check above fails."""
    name, field, value = WIDENINGS[widening]
    row = identities.ROWS[name]
    if field == "observations":
        wider = Row(row.events, value, row.jetstream)
    elif field == "events":
        wider = Row((*row.events, value), row.observations, row.jetstream)
    else:
        wider = Row(row.events, row.observations, (*row.jetstream, value))
    monkeypatch.setitem(identities.ROWS, name, wider)
    server = _start(tmp_path)
    try:
        found = await mismatches(server, name)
    finally:
        server.stop()
    assert found
    assert all("allowed outside the row" in f for f in found), found


async def test_the_api_cannot_delete_an_observation_or_a_durable_consumer(tmp_path: Path) -> None:
    """The issue's probe with real streams: as noema-api, observation #1 and attend's durable
    consumer survive a deletion attempt."""
    server = _start(tmp_path)
    op = await connect(server.operator_url, name="rows-operator")
    violations = Violations()
    api = await connect(server.url_for("api"), name="rows-api", error_cb=violations.record)
    try:
        await ensure_streams(op.jetstream(), T)
        js = op.jetstream()
        ack = await js.publish(T.observation_subject(WORKSPACE, MIND), b'{"id": "o1"}')
        durable = T.durable("attend")
        config = ConsumerConfig(
            name=durable,
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
        )
        await js.add_consumer(OBS, config)
        as_api = api.jetstream(timeout=1)
        with pytest.raises(nats.errors.TimeoutError):
            await as_api.delete_msg(OBS, ack.seq)
        with pytest.raises(nats.errors.TimeoutError):
            await as_api.delete_consumer(OBS, durable)
        # Nor re-configure it by creating one of the same name, with or without a filter.
        with pytest.raises(nats.errors.TimeoutError):
            await as_api.add_consumer(OBS, ConsumerConfig(name=durable, filter_subject=f"{P}.obs.x.>"))
        # An unnamed create (what its readers use) cannot name a durable in its body either.
        for key in ("durable_name", "name"):
            body = {"stream_name": OBS, "config": {key: durable, "filter_subject": f"{P}.obs.x.>"}}
            reply = await api.request(f"$JS.API.CONSUMER.CREATE.{OBS}", json.dumps(body).encode(), timeout=2)
            assert "error" in json.loads(reply.data), reply.data
        assert (await js.get_msg(OBS, ack.seq)).data == b'{"id": "o1"}'
        info = await js.consumer_info(OBS, durable)
        assert info.config.filter_subject in (None, "")
        deletions = [f"$JS.API.STREAM.MSG.DELETE.{OBS}", f"$JS.API.CONSUMER.DELETE.{OBS}.{durable}"]
        assert violations.refused(deletions) == set(deletions)
    finally:
        await api.close()
        await op.close()
        server.stop()
