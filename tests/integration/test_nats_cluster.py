"""Connecting to a real three-server JetStream cluster (``noema.runtime.cluster``) while one server
is down: what a worker started or reconnecting at that moment relies on."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from nats.aio.client import Client
from nats.errors import NoRespondersError, NoServersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import ServiceUnavailableError

from noema.adapters.jetstream import connect
from noema.runtime.cluster import EmbeddedCluster
from tests.support import assert_eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    nodes = EmbeddedCluster(tmp_path / "var", 3)
    nodes.start()
    try:
        yield nodes
    finally:
        nodes.stop()


def _kill(cluster: EmbeddedCluster, index: int) -> None:
    node = cluster.nodes[index]
    assert node._proc is not None
    node._proc.send_signal(signal.SIGKILL)
    node._proc.wait(10)


async def _jetstream_answers(nc: Client) -> None:
    """JetStream answers through ``nc``: the killed server may have led JetStream's meta group,
    and electing a new leader takes the others a few seconds."""

    async def answers() -> bool:
        try:
            await nc.jetstream(timeout=2).account_info()
        except (NatsTimeoutError, ServiceUnavailableError, NoRespondersError):
            return False
        return True

    await assert_eventually(answers, 30, 0.5, "JetStream answering through the servers left")


async def test_a_process_starting_while_one_server_is_down_connects_to_another(
    cluster: EmbeddedCluster,
) -> None:
    _kill(cluster, 0)
    dead = cluster.nodes[0].url
    with pytest.raises(NoServersError):  # as before URL lists: only the dead server named
        await connect(cluster.credentials.service_url(dead, "operator"), "t", max_reconnect_attempts=1)
    nc = await connect(cluster.operator_url, "t")
    try:
        assert nc.connected_url is not None
        assert nc.connected_url.port != urlsplit(dead).port
        await _jetstream_answers(nc)
    finally:
        await nc.close()


async def test_credentials_in_the_url_sign_in_to_the_servers_the_cluster_announces(
    cluster: EmbeddedCluster,
) -> None:
    # Given only one server, the client learns of the others from it; those come without
    # credentials, so the URL's must be options too, or every reconnect is refused.
    only = cluster.credentials.service_url(cluster.nodes[1].url, "operator")
    nc = await connect(only, "t")
    try:
        assert nc.connected_url is not None
        assert nc.connected_url.port == cluster.nodes[1].port
        _kill(cluster, 1)

        async def elsewhere() -> bool:
            url = nc.connected_url
            return nc.is_connected and url is not None and url.port != cluster.nodes[1].port

        await assert_eventually(elsewhere, 30, 0.2, "a reconnect to another server of the cluster")

        await _jetstream_answers(nc)
    finally:
        await nc.close()
