"""Authenticated NATS on the real server: no anonymous access; an agent reaches only its own
observations, endpoints and replies; no shipped identity may delete or purge a stream."""

from __future__ import annotations

import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import nats
import nats.errors
import pytest
from nats.aio.client import Client as NATS
from nats.js.errors import NotFoundError

from noema.adapters.jetstream import connect, ensure_streams
from noema.runtime.credentials import AgentRecord, CredentialStore
from noema.runtime.embedded import EmbeddedNats
from noema.runtime.identities import OPERATOR, SERVICES, inbox_prefix, service_user
from noema.topology import Topology
from noema_events import ObservationRecorded, decode_event
from noema_sdk import NoemaClient
from noema_service.service import build as build_service
from tests.conftest import Harness, Servers
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


class Refusals:
    """The permission errors the server sent one connection (nats-py reports them to error_cb)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def record(self, exc: Exception) -> None:
        """The ``error_cb``."""
        self.seen.append(str(exc).lower())

    async def of(self, subject: str) -> bool:
        """Whether the server refused something on ``subject`` (waits, bounded, for its error)."""

        async def found() -> bool:
            return any("permissions violation" in e and subject.lower() in e for e in self.seen)

        return bool(await assert_eventually(found, timeout=5))


async def _as(url: str, user: str, password: str, refusals: Refusals | None = None) -> NATS:
    return await nats.connect(
        url,
        user=user,
        password=password,
        inbox_prefix=inbox_prefix(user),
        allow_reconnect=False,
        error_cb=(refusals or Refusals()).record,
    )


def _plain(servers: Servers) -> str:
    assert servers.nats is not None, "these tests need the embedded NATS (the default backend)"
    return servers.nats.url


async def _add_agent(
    servers: Servers, harness: Harness, workspace: str, agent: str, role: str
) -> AgentRecord:
    """What `noemactl agent add` does: record the identity, reload the running server; then wait
    until the server takes the new password."""
    assert servers.nats is not None
    record = CredentialStore(servers.nats.data_dir).add_agent(workspace, agent, role, harness.topology.prefix)
    assert servers.nats.reload()

    async def accepted() -> bool:
        try:
            nc = await _as(_plain(servers), record.user, record.password)
        except (nats.errors.Error, OSError):
            return False
        await nc.close()
        return True

    await assert_eventually(accepted, timeout=10)
    return record


async def test_a_client_without_credentials_is_refused(servers: Servers) -> None:
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(
            _plain(servers), allow_reconnect=False, connect_timeout=2, error_cb=Refusals().record
        )
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(
            _plain(servers),
            user="noema-operator",
            password="guess",
            allow_reconnect=False,
            error_cb=Refusals().record,
        )


async def test_an_agent_publishes_its_own_observations_and_calls_its_own_endpoints(
    servers: Servers, harness: Harness
) -> None:
    await harness.start(build_service)
    alice = await _add_agent(servers, harness, "acme", "alice", "engineer")
    async with NoemaClient.connect(
        _plain(servers),
        user=alice.user,
        password=alice.password,
        workspace="acme",
        agent="alice",
        role="engineer",
        prefix=harness.topology.prefix,
    ) as noema:
        receipt = await noema.publish_observation("the build cache lives in /srv/cache")
        found = await noema.search_memory("build cache", mode="keyword")
    stored = await harness.js.get_msg(harness.topology.observation_stream, receipt.seq)
    assert stored.subject == harness.topology.observation_subject("acme", "alice")
    event = decode_event(stored.data or b"")
    assert isinstance(event, ObservationRecorded)
    assert (event.workspace, event.mind, event.payload.content) == (
        "acme",
        "alice",
        "the build cache lives in /srv/cache",
    )
    assert found.query == "build cache"  # answered by the service (nothing is a memory yet)


async def test_an_agent_reaches_nothing_but_its_own_subjects(servers: Servers, harness: Harness) -> None:
    await harness.start(build_service)
    alice = await _add_agent(servers, harness, "acme", "alice", "engineer")
    await _add_agent(servers, harness, "other", "bob", "engineer")
    p = harness.topology.prefix
    refusals = Refusals()
    nc = await _as(_plain(servers), alice.user, alice.password, refusals)
    try:
        # Another workspace's memories, another agent's, another role's grants: not even asked.
        for subject in (
            f"{p}.agent.other.engineer.bob.search_memory",
            f"{p}.agent.acme.engineer.bob.search_memory",
            f"{p}.agent.acme.admin.alice.search_memory",
        ):
            with pytest.raises(nats.errors.TimeoutError):
                await nc.request(subject, b'{"query": "secrets"}', timeout=0.5)
            assert await refusals.of(subject)
        # Observations into another workspace or another mind: refused, and nothing stored.
        for subject in (f"{p}.obs.other.bob", f"{p}.obs.acme.bob", f"{p}.evt.acme.alice.memory_created"):
            await nc.publish(subject, b"{}")
            assert await refusals.of(subject)
        # The event stream, other agents' requests, other identities' replies.
        for subject in (
            f"{p}.evt.>",
            f"{p}.obs.>",
            f"{p}.agent.>",
            "_INBOX.>",
            inbox_prefix("agent.other.bob") + ".>",
        ):
            await nc.subscribe(subject)
            assert await refusals.of(subject)
        # The JetStream API: no stream info, no deleting or purging, no consumers.
        for stream in (harness.topology.event_stream, harness.topology.observation_stream):
            for subject in (
                f"$JS.API.STREAM.DELETE.{stream}",
                f"$JS.API.STREAM.PURGE.{stream}",
                f"$JS.API.STREAM.INFO.{stream}",
                f"$JS.API.CONSUMER.CREATE.{stream}",
                f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.spy",
            ):
                with pytest.raises(nats.errors.TimeoutError):
                    await nc.request(subject, b"{}", timeout=0.5)
                assert await refusals.of(subject)
    finally:
        await nc.close()
    info = await harness.js.stream_info(harness.topology.observation_stream)
    assert info.state.messages == 0
    assert (await harness.js.stream_info(harness.topology.event_stream)).config.name  # still there


async def test_a_removed_agent_is_refused(servers: Servers, harness: Harness) -> None:
    alice = await _add_agent(servers, harness, "acme", "alice", "engineer")
    assert servers.nats is not None
    assert CredentialStore(servers.nats.data_dir).remove_agent("acme", "alice")
    assert servers.nats.reload()

    async def refused() -> bool:
        try:
            nc = await _as(_plain(servers), alice.user, alice.password)
        except (nats.errors.Error, OSError):
            return True
        await nc.close()
        return False

    await assert_eventually(refused, timeout=10)


@pytest.fixture(scope="module")
def own_server() -> Iterator[EmbeddedNats]:
    """A server of its own, configured (as `noemactl up` does) for one prefix: its services'
    permissions are those shipped."""
    folder = Path(tempfile.mkdtemp(prefix="noema-auth-", dir="/tmp"))
    server = EmbeddedNats(folder, prefix="authz")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
async def prepared(own_server: EmbeddedNats) -> EmbeddedNats:
    nc = await connect(own_server.operator_url, name="test-operator")
    try:
        await ensure_streams(nc.jetstream(), Topology("authz"))
    finally:
        await nc.close()
    return own_server


@pytest.mark.parametrize("name", [*SERVICES, OPERATOR])
async def test_no_shipped_identity_may_delete_purge_or_reconfigure_the_event_stream(
    prepared: EmbeddedNats, name: str
) -> None:
    topology = Topology("authz")
    refusals = Refusals()
    nc = await connect(prepared.url_for(name), name=f"test-{name}", error_cb=refusals.record)
    try:
        js = nc.jetstream(timeout=0.5)
        with pytest.raises(nats.errors.TimeoutError):
            await js.delete_stream(topology.event_stream)
        assert await refusals.of(f"$JS.API.STREAM.DELETE.{topology.event_stream}")
        with pytest.raises(nats.errors.TimeoutError):
            await js.purge_stream(topology.event_stream)
        assert await refusals.of(f"$JS.API.STREAM.PURGE.{topology.event_stream}")
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request(f"$JS.API.STREAM.MSG.DELETE.{topology.event_stream}", b'{"seq": 1}', timeout=0.5)
        if name != OPERATOR:  # only the operator prepares (creates, updates) the streams
            with pytest.raises(RuntimeError, match="Only the operator"):
                await ensure_streams(js, topology, duplicate_window_s=60)
        # Every process may read the streams' state (`noemactl status` probes with it).
        assert (await js.stream_info(topology.event_stream)).config.name == topology.event_stream
    finally:
        await nc.close()


async def test_a_worker_identity_runs_its_consumer_and_publishes_events(prepared: EmbeddedNats) -> None:
    """The attend identity can do what attend does: its consumer on the observations, events out."""
    from noema.adapters.pull import durable_puller

    topology = Topology("authz")
    refusals = Refusals()
    nc = await connect(prepared.url_for("attend"), name="test-attend", error_cb=refusals.record)
    op = await connect(prepared.operator_url, name="test-operator")
    try:
        # Streams as prepared: a worker's own ensure_streams at start only reads them.
        await ensure_streams(nc.jetstream(timeout=1), topology)
        await op.jetstream().publish(topology.observation_subject("acme", "alice"), b"{}")
        puller = await durable_puller(
            nc,
            topology.observation_stream,
            topology.durable("attend"),
            topology.observations_only,
            10,
            ack_wait=30,
            max_ack_pending=10,
        )
        msgs = await assert_eventually(lambda: puller.fetch(timeout=1.0))
        await msgs[0].ack()
        await puller.stop()
        ack = await nc.jetstream().publish(f"{topology.prefix}.evt.acme.alice.attention_decided", b"{}")
        assert ack.stream == topology.event_stream
        # …but not another worker's consumer.
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request(
                f"$JS.API.CONSUMER.INFO.{topology.event_stream}.{topology.durable('projector')}",
                b"",
                timeout=0.5,
            )
        assert not [e for e in refusals.seen if "attend" in e]
    finally:
        await nc.close()
        await op.close()


def test_credential_files_are_readable_by_their_owner_only(own_server: EmbeddedNats) -> None:
    folder = own_server.data_dir
    CredentialStore(folder).add_agent("acme", "alice", "engineer", "authz")
    own_server.reload()
    for name in ("nats-auth.json", "nats.conf"):
        mode = stat.S_IMODE((folder / name).stat().st_mode)
        assert mode == 0o600, f"{name} is {oct(mode)}"
    assert service_user("attend") in (folder / "nats.conf").read_text()


async def test_a_worker_starts_after_a_nats_restart_emptied_the_vector_cache() -> None:
    """The vector cache's stream is memory only: a restarted server has lost it, and a worker may
    not create it (only the operator may). A worker starting then must start, without the cache,
    not fail — before, every worker restarted after a NATS restart crash-looped on it for good."""
    folder = Path(tempfile.mkdtemp(prefix="noema-auth-", dir="/tmp"))
    server = EmbeddedNats(folder, prefix="authz")
    server.start()
    topology = Topology("authz")
    try:
        op = await connect(server.operator_url, name="test-operator")
        try:
            await ensure_streams(op.jetstream(), topology)
        finally:
            await op.close()
        server.stop()
        server.restart()
        nc = await connect(server.url_for("embed"), name="test-embed")
        try:
            js = nc.jetstream(timeout=1)
            with pytest.raises(NotFoundError):
                await js.stream_info(topology.vector_stream)
            await ensure_streams(js, topology)  # reads the others, works without the cache
            assert (await js.stream_info(topology.event_stream)).config.name == topology.event_stream
        finally:
            await nc.close()
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
