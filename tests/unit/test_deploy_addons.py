"""The optional deployment pieces agree with the base manifests and the code: KEDA scales the
stateless workers, each on the stream and durable consumer its composition root really binds, and
attend and conflicts on their partitions' consumers between their replicas and the partition count
(generated for any count); the NATS chart values run a JetStream cluster that fsyncs every write,
where the processes look for it; the CloudNativePG overlay gives every process the operator's
database URL and pgvector."""

from __future__ import annotations

import importlib
import re
from contextlib import AsyncExitStack
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from nats.js.api import ConsumerConfig

from noema.adapters import jetstream
from noema.runtime.kedaconfig import scaled_objects
from noema.runtime.settings import Located, Settings
from noema.topology import Topology

from .deploy_files import (
    CLAIMED,
    DEPLOY,
    container,
    documents,
    environment,
    load,
    module_of,
    of_kind,
    pod_labels,
    selects,
)

BASE = documents(DEPLOY / "k8s")
DEPLOYMENTS = of_kind(BASE, "Deployment")
NATS_VALUES = load(DEPLOY / "nats" / "values.yaml")


class _JetStream:
    def __init__(self) -> None:
        self.consumers: list[tuple[str, ConsumerConfig]] = []

    async def add_consumer(self, stream: str, config: ConsumerConfig) -> None:
        self.consumers.append((stream, config))


class _Nats:
    """What a worker's composition root touches of a NATS client, recording the consumers it adds."""

    def __init__(self) -> None:
        self.js = _JetStream()

    def jetstream(self, **options: Any) -> _JetStream:
        return self.js

    def new_inbox(self) -> str:
        return "_INBOX.test"

    async def subscribe(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def close(self) -> None:
        return None


async def bound_consumers(
    module: str, settings: Located, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, ConsumerConfig]]:
    """The (stream, consumer) pairs ``<module>.service.build`` creates, run without any server."""
    service = importlib.import_module(f"{module}.service")
    nc = _Nats()

    async def connect(*args: Any, **kwargs: Any) -> _Nats:
        return nc

    async def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    async def pool(*args: Any, **kwargs: Any) -> SimpleNamespace:
        return SimpleNamespace(close=nothing)

    # The composition roots connect and open their pools through noema.runtime.wiring, which
    # loads the JetStream adapter when it first connects.
    monkeypatch.setattr(jetstream, "connect", connect)
    monkeypatch.setattr(jetstream, "ensure_streams", nothing)

    async def store(*args: Any, **kwargs: Any) -> SimpleNamespace:
        return SimpleNamespace(has_vectors=False)

    fakes = {
        "migrate": nothing,
        "open_pool": pool,
        "create_embedder": lambda spec: SimpleNamespace(name="fake", dimensions=3),
        "RecallStore": SimpleNamespace(create_pool=pool, open=store),
    }
    for name, fake in fakes.items():
        if hasattr(service, name):
            monkeypatch.setattr(service, name, fake)
    async with AsyncExitStack() as stack:
        await service.build(settings, stack)
    return nc.js.consumers


async def test_keda_scales_stateless_workers_on_the_durable_consumer_they_bind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scaled = documents(DEPLOY / "k8s" / "keda")
    assert scaled
    deployments = {d["metadata"]["name"]: d for d in DEPLOYMENTS}
    monitor = NATS_VALUES["config"]["monitor"]
    for so in scaled:
        assert (so["apiVersion"], so["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
        target = deployments[so["spec"]["scaleTargetRef"]["name"]]
        module = module_of(container(target)["command"])
        if module in CLAIMED:
            continue  # below
        assert "replicas" not in target["spec"], "the autoscaler owns replicas; applying must not reset them"
        settings = Located.of(Settings.from_env(environment(BASE, target)))
        [(stream, consumer)] = await bound_consumers(module, settings, monkeypatch)
        [trigger] = so["spec"]["triggers"]
        meta = trigger["metadata"]
        assert trigger["type"] == "nats-jetstream"
        assert (meta["stream"], meta["consumer"]) == (stream, consumer.durable_name)
        assert 1 <= so["spec"]["minReplicaCount"] <= so["spec"]["maxReplicaCount"]
        # Every replica can hold a message in flight (a consumer with one in flight gains nothing).
        assert consumer.max_ack_pending >= so["spec"]["maxReplicaCount"]
        assert int(meta["lagThreshold"]) > 0
        host, port = meta["natsServerMonitoringEndpoint"].rsplit(":", 1)
        assert host == f"{NATS_VALUES['fullnameOverride']}-headless.{NATS_VALUES['namespaceOverride']}.svc"
        assert monitor["enabled"]
        assert int(port) == monitor["port"]
        assert meta["account"] == "$G"  # the default account: the values configure no accounts
        assert "accounts" not in NATS_VALUES["config"].get("merge", {})


PARTITIONED = {
    "noema_attend": ("attend", "observation_stream"),
    "noema_conflicts": ("conflicts", "event_stream"),
}


def test_the_generated_scaled_objects_are_current() -> None:
    assert (DEPLOY / "k8s" / "keda" / "scaledobjects.yaml").read_text() == scaled_objects(), (
        "run `make deploy-files`"
    )


def _scaled_by_module(scaled: list[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    deployments = {d["metadata"]["name"]: d for d in DEPLOYMENTS}
    found = {}
    for so in scaled:
        target = deployments[so["spec"]["scaleTargetRef"]["name"]]
        found[module_of(container(target)["command"])] = (so, target)
    return found


def test_keda_scales_partitioned_workers_on_every_partitions_consumer_up_to_the_partition_count() -> None:
    scaled = _scaled_by_module(documents(DEPLOY / "k8s" / "keda"))
    assert "noema_projector" not in scaled, "one ordered writer and a standby: never scaled"
    assert PARTITIONED.keys() <= scaled.keys()
    for module in PARTITIONED:
        so, target = scaled[module]
        topology = Located.of(Settings.from_env(environment(BASE, target))).topology
        assert topology.partitioned
        _check_partitioned(module, so, target, topology)


@pytest.mark.parametrize("partitions", [3, 8, 64])
def test_the_triggers_follow_any_partition_count(partitions: int) -> None:
    scaled = _scaled_by_module(list(yaml.safe_load_all(scaled_objects(partitions))))
    here = _scaled_by_module(documents(DEPLOY / "k8s" / "keda"))
    for module in PARTITIONED:
        so, target = scaled[module]
        _check_partitioned(module, so, target, Topology("noema", partitions))
    for module in scaled.keys() - PARTITIONED.keys():
        assert scaled[module][0] == here[module][0], "the stateless workers' do not depend on it"


@pytest.mark.parametrize("partitions", [1, 2])
def test_with_no_more_partitions_than_replicas_attend_and_conflicts_are_not_scaled(partitions: int) -> None:
    text = scaled_objects(partitions)
    scaled = _scaled_by_module(list(yaml.safe_load_all(text)))
    assert scaled.keys() == set(_scaled_by_module(documents(DEPLOY / "k8s" / "keda"))) - PARTITIONED.keys()
    assert "attend and conflicts are not scaled" in text


def _check_partitioned(module: str, so: dict[str, Any], target: dict[str, Any], topology: Topology) -> None:
    worker, stream_of = PARTITIONED[module]
    spec = so["spec"]
    # Never fewer than the base's replicas (a standby to take over), never more than partitions.
    assert spec["minReplicaCount"] == target["spec"]["replicas"] >= 2
    assert spec["maxReplicaCount"] == topology.partitions
    watched = [(t["metadata"]["stream"], t["metadata"]["consumer"]) for t in spec["triggers"]]
    stream = getattr(topology, stream_of)
    assert watched == [(stream, topology.partitioned_durable(worker, p)) for p in range(topology.partitions)]
    for trigger in spec["triggers"]:
        assert trigger["type"] == "nats-jetstream"
        assert int(trigger["metadata"]["lagThreshold"]) > 0
    # Each change moves partitions between replicas: no scaling down at the first calm poll.
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] >= 300


def test_the_nats_chart_runs_a_jetstream_cluster_that_fsyncs_every_write() -> None:
    config = NATS_VALUES["config"]
    jetstream = config["jetstream"]
    assert jetstream["enabled"]
    assert jetstream["merge"]["sync_interval"] == "always"
    assert jetstream["fileStore"]["enabled"]
    assert jetstream["fileStore"]["pvc"]["enabled"]
    assert jetstream["fileStore"]["pvc"]["size"]
    assert config["cluster"]["enabled"]
    servers = config["cluster"]["replicas"]
    assert servers >= 3
    assert servers % 2 == 1  # a RAFT majority survives the loss of one server
    for d in DEPLOYMENTS:
        env = environment(BASE, d)
        assert 1 < Settings.from_env(env).stream_replicas <= servers
        nats = urlsplit(env["NOEMA_NATS_URL"])
        assert nats.hostname == f"{NATS_VALUES['fullnameOverride']}.{NATS_VALUES['namespaceOverride']}.svc"
        assert nats.port == config.get("nats", {}).get("port", 4222)  # the chart's client port


def test_nats_is_a_server_with_atomic_batch_publish_everywhere() -> None:
    chart = NATS_VALUES["container"]["image"]["tag"]
    compose = load(DEPLOY / "compose.yaml")["services"]["nats"]["image"].split(":")[1]
    assert chart == compose
    major, minor = (int(n) for n in re.findall(r"^(\d+)\.(\d+)", chart)[0])
    assert (major, minor) >= (2, 12)  # allow_atomic on the streams (noema.adapters.jetstream)


def test_the_cloudnativepg_overlay_gives_every_process_the_operators_database_url() -> None:
    overlay = load(DEPLOY / "cnpg" / "kustomization.yaml")
    added = documents(DEPLOY / "cnpg")
    [cluster] = of_kind(added, "Cluster")
    assert cluster["spec"]["instances"] == 3
    # Recall's room: a quarter of the memory limit, what the buffers held kept across restarts.
    assert cluster["spec"]["postgresql"]["parameters"]["shared_buffers"] == "512MB"
    assert cluster["spec"]["resources"]["limits"]["memory"] == "2Gi"
    assert cluster["spec"]["postgresql"]["shared_preload_libraries"] == ["pg_prewarm"]
    initdb = cluster["spec"]["bootstrap"]["initdb"]
    assert initdb["owner"]
    assert any(
        re.match(r"CREATE EXTENSION IF NOT EXISTS vector\b", sql) for sql in initdb["postInitApplicationSQL"]
    )
    [to_deployments, to_prepare, to_secret] = overlay["patches"]
    assert to_deployments["target"]["kind"] == "Deployment"
    # The Job preparing migrations and streams gets the same database URL.
    [job] = [d for d in documents(DEPLOY / "k8s") if d["kind"] == "Job"]
    assert to_prepare["target"] == {"kind": "Job", "name": job["metadata"]["name"]}
    assert (
        yaml.safe_load(to_prepare["patch"])["spec"]["template"]
        == yaml.safe_load(to_deployments["patch"])["spec"]["template"]
    )
    key, value = to_deployments["target"]["labelSelector"].split("=")
    assert all(d["metadata"]["labels"][key] == value for d in DEPLOYMENTS)
    [patched] = yaml.safe_load(to_deployments["patch"])["spec"]["template"]["spec"]["containers"]
    assert {container(d)["name"] for d in DEPLOYMENTS} == {patched["name"]}
    [url] = patched["env"]
    assert url["name"] == "NOEMA_DATABASE_URL"
    assert url["valueFrom"]["secretKeyRef"] == {"name": f"{cluster['metadata']['name']}-app", "key": "uri"}
    # The secret it deletes is exactly the one the base reads the URL from, and only that goes.
    deleted = yaml.safe_load(to_secret["patch"])
    assert (deleted["$patch"], deleted["kind"]) == ("delete", "Secret")
    for d in DEPLOYMENTS:
        sources = container(d)["envFrom"]
        assert {s["secretRef"]["name"] for s in sources if "secretRef" in s} == {deleted["metadata"]["name"]}
        assert patched["envFrom"] == [s for s in sources if "secretRef" not in s]


def test_the_database_admits_noema_processes_despite_the_default_deny() -> None:
    added = documents(DEPLOY / "cnpg")
    [cluster] = of_kind(added, "Cluster")
    [policy] = [
        p for p in of_kind(added, "NetworkPolicy") if "cnpg.io/cluster" in str(p["spec"]["podSelector"])
    ]
    assert policy["spec"]["podSelector"]["matchLabels"] == {"cnpg.io/cluster": cluster["metadata"]["name"]}
    [noema] = [
        rule
        for rule in policy["spec"]["ingress"]
        for source in rule["from"]
        if all(
            selects(source.get("podSelector", {"matchLabels": {"-": "-"}}), pod_labels(d))
            for d in DEPLOYMENTS
        )
    ]
    assert [q["port"] for q in noema["ports"]] == [5432]
