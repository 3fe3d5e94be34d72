"""Connecting to a real three-server JetStream cluster (``noema.runtime.cluster``) while one server
is down: what a worker started or reconnecting at that moment relies on."""

from __future__ import annotations

import re
import signal
import time
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


_LEADER = re.compile(r"JetStream cluster new metadata leader|Self is new JetStream cluster metadata leader")


def _logs(cluster: EmbeddedCluster) -> list[str]:
    return [
        (cluster.data_dir / f"nats-{i}.log").read_text(errors="replace")
        if (cluster.data_dir / f"nats-{i}.log").exists()
        else ""
        for i in range(1, len(cluster.nodes) + 1)
    ]


def _every_server_follows_a_leader(cluster: EmbeddedCluster, timeout: float = 30.0) -> None:
    """Until every server has heard of the JetStream meta leader (start() returns once the leader
    answers, which two of three servers suffice for): killing one before the third has joined
    could leave the two others without the quorum of a meta group that never counted the third."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_LEADER.search(log) for log in _logs(cluster)):
            return
        time.sleep(0.2)
    raise AssertionError(
        "not every server of the cluster heard of a JetStream meta leader:\n" + _tails(cluster)
    )


def _tails(cluster: EmbeddedCluster, lines: int = 15) -> str:
    return "\n".join(
        f"--- nats-{i}.log\n" + "\n".join(log.splitlines()[-lines:])
        for i, log in enumerate(_logs(cluster), 1)
    )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    nodes = EmbeddedCluster(tmp_path / "var", 3)
    nodes.start()
    try:
        _every_server_follows_a_leader(nodes)
        yield nodes
    finally:
        nodes.stop()


def _kill(cluster: EmbeddedCluster, index: int) -> None:
    node = cluster.nodes[index]
    assert node._proc is not None
    node._proc.send_signal(signal.SIGKILL)
    node._proc.wait(10)


async def _jetstream_answers(nc: Client, cluster: EmbeddedCluster) -> None:
    """JetStream answers through ``nc``: the killed server may have led JetStream's meta group,
    and electing a new leader takes the others a few seconds."""

    async def answers() -> bool:
        try:
            await nc.jetstream(timeout=2).account_info()
        except (NatsTimeoutError, ServiceUnavailableError, NoRespondersError):
            return False
        return True

    try:
        await assert_eventually(answers, 60, 0.5, "JetStream answering through the servers left")
    except AssertionError as e:  # what the servers said, for the next time it happens
        raise AssertionError(f"{e}\n{_tails(cluster)}") from None


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
        await _jetstream_answers(nc, cluster)
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

        await _jetstream_answers(nc, cluster)
    finally:
        await nc.close()
