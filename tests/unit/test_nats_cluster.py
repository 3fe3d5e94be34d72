"""Running on a NATS cluster, without servers: lists of server URLs, the embedded cluster's
configuration, the supervisor's view of its servers, and status's verdict on stream replicas."""

from __future__ import annotations

from pathlib import Path

import pytest
from nats.js.api import ClusterInfo, PeerInfo

from noema.adapters.jetstream import auth_options, nats_servers
from noema.runtime.cluster import EmbeddedCluster, reload_embedded_nats
from noema.runtime.credentials import CredentialStore, redact_url, url_with_credentials
from noema.runtime.embedded import ClusterNode, EmbeddedNats
from noema.runtime.readiness import Check, assess_stream, problems, unready
from noema.runtime.settings import Settings, SettingsError
from noema_cli.supervisor import Supervisor, _down, _embedded_nats, _Server

THREE = "nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224"


def peer(
    name: str, *, current: bool = True, offline: bool | None = None, seen_s: float | None = 0.2
) -> PeerInfo:
    return PeerInfo(
        name=name, current=current, offline=offline, active=None if seen_s is None else int(seen_s * 1e9)
    )


def placed(leader: str | None, *replicas: PeerInfo) -> ClusterInfo:
    return ClusterInfo(leader=leader, name="noema", replicas=list(replicas))


def test_a_url_may_list_the_servers_of_a_cluster() -> None:
    assert nats_servers(THREE) == THREE.split(",")
    assert nats_servers(" nats://a:1 , nats://b:2,") == ["nats://a:1", "nats://b:2"]
    assert nats_servers("nats://a:1") == ["nats://a:1"]
    with pytest.raises(ValueError, match="no NATS server"):
        nats_servers(" , ")


def test_credentials_go_on_every_server_of_a_list_and_are_redacted_on_every_one() -> None:
    url = url_with_credentials(THREE, "noema-attend", "p@ss")
    assert url.split(",") == [f"nats://noema-attend:p%40ss@127.0.0.1:{p}" for p in (4222, 4223, 4224)]
    assert redact_url(url).count("noema-attend:***@") == 3
    assert "p%40ss" not in redact_url(url)


def test_credentials_in_the_url_sign_in_to_servers_the_client_discovers_too() -> None:
    # Servers the cluster announces come without credentials: the options carry them.
    options = auth_options(url_with_credentials(THREE, "noema-attend", "p@ss"), None)
    assert (options["user"], options["password"]) == ("noema-attend", "p@ss")
    assert options["inbox_prefix"] == "_INBOX.noema-attend"
    assert "user" not in auth_options(THREE, None)


def test_up_embeds_one_nats_server_unless_told_to_embed_a_cluster(tmp_path: Path) -> None:
    assert Settings.from_env({}).nats_nodes == 1
    assert isinstance(_embedded_nats(Settings(), tmp_path), EmbeddedNats)
    cluster = _embedded_nats(
        Settings.from_env({"NOEMA_NATS_NODES": "3", "NOEMA_STREAM_REPLICAS": "3"}), tmp_path
    )
    assert isinstance(cluster, EmbeddedCluster)
    assert len(cluster.url.split(",")) == 3
    with pytest.raises(SettingsError, match="NOEMA_NATS_NODES"):
        Settings.from_env({"NOEMA_NATS_NODES": "0"})


def test_more_stream_replicas_than_embedded_servers_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="NOEMA_STREAM_REPLICAS=3 needs as many NATS servers"):
        _embedded_nats(Settings(stream_replicas=3), tmp_path)


def test_each_server_of_the_embedded_cluster_has_its_name_files_and_store_and_the_same_users(
    tmp_path: Path,
) -> None:
    cluster = EmbeddedCluster(tmp_path, 3)
    configs = [node._config() for node in cluster.nodes]
    password = CredentialStore(tmp_path).route_password()
    for i, (node, config) in enumerate(zip(cluster.nodes, configs, strict=True), start=1):
        assert node.node is not None
        assert f'server_name: "noema-{i}"' in config
        assert f'store_dir: "{tmp_path / f"nats-{i}"}"' in config
        assert f'listen: "127.0.0.1:{node.port}"' in config
        assert config.count("nats-route://") == 2, "a route to each other server"
        assert f'127.0.0.1:{node.node.route_ports[i - 1]}",' not in config.split("routes:")[1]
        assert password in config
    users = [c[c.index("authorization {\n  users") :] for c in configs]
    assert users[0] == users[1] == users[2], "the same identities on every server"
    assert not cluster.reload(), "written, though no server runs to load it"
    again = EmbeddedCluster(tmp_path, 3)  # the next `up` of the data folder: the same route ports
    assert [n.node.route_ports for n in again.nodes if n.node] == [
        n.node.route_ports for n in cluster.nodes if n.node
    ]


def test_a_cluster_node_routes_on_loopback_only_with_a_password_of_its_own() -> None:
    config = ClusterNode(2, (7001, 7002, 7003), "secret").config()
    assert 'listen: "127.0.0.1:7002"' in config
    assert '"nats-route://noema-route:secret@127.0.0.1:7001"' in config
    assert '7002"' not in config.split("routes:")[1]
    assert 'authorization { user: "noema-route", password: "secret" }' in config


def test_reloading_after_an_agent_is_added_rewrites_every_server_of_a_cluster(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(tmp_path, 3)
    cluster.reload()
    CredentialStore(tmp_path).add_agent("acme", "alice", "engineer")
    assert not reload_embedded_nats(tmp_path), "no server runs to load it"
    assert all("agent.acme.alice" in node.conf.read_text() for node in cluster.nodes)
    assert not (tmp_path / "nats.conf").exists(), "a single server's configuration is not made up"


def test_every_process_up_starts_is_given_every_server_of_the_cluster_and_its_own_identity(
    tmp_path: Path,
) -> None:
    # So that a worker (re)started while one server is down connects to another.
    supervisor = Supervisor(Settings(nats_nodes=3, stream_replicas=3))
    cluster = EmbeddedCluster(tmp_path, 3)
    supervisor._nats = cluster
    env = supervisor._child_env("attend", {"NOEMA_NATS_URL": "nats://elsewhere:4222"})
    assert env["NOEMA_NATS_URL"] == cluster.url
    assert nats_servers(env["NOEMA_NATS_URL"]) == [node.url for node in cluster.nodes]
    assert env["NOEMA_NATS_USER"] == "noema-attend"
    assert env["NOEMA_NATS_PASSWORD"] == cluster.credentials.password("attend")


def test_services_wait_for_nats_only_when_every_server_of_the_cluster_is_down() -> None:
    servers = [_Server(f"nats-{i}", None) for i in (1, 2, 3)] + [_Server("postgres", None)]  # type: ignore[arg-type]
    assert _down(servers) == frozenset()
    servers[0].down_since = 1.0
    assert _down(servers) == {"nats-1"}
    servers[1].down_since = servers[2].down_since = 1.0
    assert "nats" in _down(servers)
    single = [_Server("nats", None), _Server("postgres", None)]  # type: ignore[arg-type]
    single[0].down_since = 1.0
    assert _down(single) == {"nats"}


def test_a_stream_on_one_server_is_judged_by_its_existence_alone() -> None:
    assert assess_stream("NOEMA_EVENTS", 12, None) == assess_stream(
        "NOEMA_EVENTS", 12, placed("noema-embedded")
    )
    assert assess_stream("NOEMA_EVENTS", 12, None).line == "stream NOEMA_EVENTS: 12 messages"


def test_a_stream_with_every_replica_current_is_fine_and_names_its_leader() -> None:
    check = assess_stream("NOEMA_EVENTS", 12, placed("noema-1", peer("noema-2"), peer("noema-3")))
    assert check.ok
    assert check.detail == "12 messages; 3 replicas, leader noema-1"


def test_a_replica_whose_server_is_gone_fails_the_stream_naming_the_server() -> None:
    # What a leader reports for a killed server: not current, never seen since.
    check = assess_stream(
        "NOEMA_EVENTS", 12, placed("noema-1", peer("noema-2", current=False, seen_s=None), peer("noema-3"))
    )
    assert not check.ok
    assert "replica on server noema-2 down (2 of 3 servers serve it, leader noema-1)" in check.detail
    offline = assess_stream(
        "NOEMA_EVENTS", 12, placed("noema-1", peer("noema-2", offline=True), peer("noema-3"))
    )
    assert not offline.ok
    silent = assess_stream("NOEMA_EVENTS", 12, placed("noema-1", peer("noema-2", current=False, seen_s=30)))
    assert not silent.ok


def test_a_replica_catching_up_after_its_server_came_back_is_fine_and_said() -> None:
    check = assess_stream(
        "NOEMA_EVENTS", 12, placed("noema-1", peer("noema-2", current=False, seen_s=0.5), peer("noema-3"))
    )
    assert check.ok
    assert check.detail.endswith("catching up on noema-2")


def test_a_stream_without_a_leader_fails() -> None:
    check = assess_stream("NOEMA_EVENTS", 12, placed(None, peer("noema-2"), peer("noema-3")))
    assert not check.ok
    assert "no leader" in check.detail


def test_a_replica_down_fails_status_but_leaves_the_api_ready() -> None:
    degraded = assess_stream(
        "NOEMA_EVENTS", 12, placed("noema-1", peer("noema-2", offline=True), peer("noema-3"))
    )
    down = Check("postgres", False, "no answer within 2 s")
    assert problems([degraded, down]) == [degraded.line, down.line]
    assert unready([degraded, down]) == [down.line]
    assert unready([degraded]) == []
