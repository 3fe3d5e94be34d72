"""The single-host compose file agrees with the code: every process `noemactl up` runs is a service of
the one image, started as `python -m <module>` with only variables Noema reads and the servers'
addresses; NATS fsyncs every write on a volume; the API is published on loopback only; what a
service waits for exists and can become healthy."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from noema.runtime.natsconfig import DEPLOY_PARTITIONS

from .deploy_files import (
    CLAIMED,
    DEPLOY,
    KNOWN_VARIABLES,
    PROBE_PATHS,
    PROCESSES,
    check_noemactl,
    load,
    module_of,
    unresolved,
)

COMPOSE = load(DEPLOY / "compose.yaml")
SERVICES_OF_COMPOSE: dict[str, dict[str, Any]] = COMPOSE["services"]


def noema_services() -> dict[str, dict[str, Any]]:
    """Compose services running a Noema process, by module."""
    return {
        module_of(s["command"]): s
        for s in SERVICES_OF_COMPOSE.values()
        if s.get("command", [""])[0] == "python"
    }


def nats_config() -> tuple[str, str]:
    """The NATS server's config file (its text) and where the container reads it."""
    nats = SERVICES_OF_COMPOSE["nats"]
    config = nats["command"][nats["command"].index("--config") + 1]
    [mount] = [v for v in nats["volumes"] if v.split(":")[1] == config]
    return (DEPLOY / mount.split(":")[0]).read_text(), config


def named_volume_at(service: dict[str, Any], path: str) -> bool:
    """Whether ``path`` in the container is on one of the file's named volumes."""
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source in COMPOSE["volumes"] and (path == target or path.startswith(target.rstrip("/") + "/")):
            return True
    return False


def test_every_process_is_a_service_of_the_one_image() -> None:
    services = noema_services()
    assert set(PROCESSES.values()) == set(services)
    for s in services.values():
        assert s["build"]["dockerfile"] == "deploy/Dockerfile"
        assert (DEPLOY / s["build"]["context"] / s["build"]["dockerfile"]).is_file()
        assert s["restart"] == "unless-stopped"  # a crashed worker comes back, as under `noemactl up`


def test_every_process_reads_only_noema_variables_pointing_at_the_servers_of_the_file() -> None:
    nats_conf, _ = nats_config()
    [nats_port] = re.findall(r"^port:\s*(\d+)", nats_conf, re.MULTILINE)
    postgres = SERVICES_OF_COMPOSE["postgres"]["environment"]
    for module, s in noema_services().items():
        env = s["environment"]
        assert set(env) <= KNOWN_VARIABLES, (module, set(env) - KNOWN_VARIABLES)
        nats = urlsplit(env["NOEMA_NATS_URL"])
        assert (nats.hostname, nats.port) == ("nats", int(nats_port))
        database = urlsplit(unresolved(env["NOEMA_DATABASE_URL"]))
        assert (database.hostname, database.port or 5432) == ("postgres", 5432)
        assert (database.username, database.path) == (
            postgres["POSTGRES_USER"],
            f"/{postgres['POSTGRES_DB']}",
        )
        # the same password variable as the server's
        assert postgres["POSTGRES_PASSWORD"].split(":")[0] in env["NOEMA_DATABASE_URL"]


ONCE = {"noema_decay", "noema_api", "noema_mcp"}
"""Run once: an hourly timer, and the API and the MCP server, each published on one host port (the
MCP server also keeps its sessions in the process)."""


def test_every_worker_runs_twice_on_the_partition_count_the_nats_users_allow() -> None:
    services = noema_services()
    assert services.keys() >= CLAIMED
    for module, service in services.items():
        assert service["environment"]["NOEMA_PARTITIONS"] == str(DEPLOY_PARTITIONS), module
        assert service.get("deploy", {}).get("replicas", 1) == (1 if module in ONCE else 2), module


def test_nats_keeps_jetstream_on_a_volume_and_fsyncs_every_write() -> None:
    nats = SERVICES_OF_COMPOSE["nats"]
    assert nats["image"].startswith("nats:")  # the official image
    text, _ = nats_config()
    [block] = re.findall(r"^jetstream\s*\{(.*?)^\}", text, re.MULTILINE | re.DOTALL)
    assert re.search(r"^\s*sync_interval:\s*always\s*$", block, re.MULTILINE)
    [store] = re.findall(r"^\s*store_dir:\s*(\S+)\s*$", block, re.MULTILINE)
    assert named_volume_at(nats, store)
    [monitor] = re.findall(r"^http_port:\s*(\d+)", text, re.MULTILINE)
    assert f"127.0.0.1:{monitor}/healthz" in " ".join(nats["healthcheck"]["test"])


def test_postgresql_has_pgvector_and_keeps_its_data_on_a_volume() -> None:
    postgres = SERVICES_OF_COMPOSE["postgres"]
    image, tag = postgres["image"].split(":")
    assert image == "pgvector/pgvector"
    [major] = re.findall(r"pg(\d+)", tag)
    # PostgreSQL 18+ images keep PGDATA under /var/lib/postgresql/<major>/docker, older ones in /data.
    assert named_volume_at(
        postgres, f"/var/lib/postgresql/{major}/docker" if int(major) >= 18 else "/var/lib/postgresql/data"
    )
    assert "pg_isready" in postgres["healthcheck"]["test"]


def test_postgresql_gets_recall_room_and_keeps_its_buffers_across_restarts() -> None:
    # As the embedded server (noema.runtime.embedded.write_server_settings): not the image's 128 MB.
    command = SERVICES_OF_COMPOSE["postgres"]["command"]
    assert command[0] == "postgres"
    settings = dict(arg.split("=", 1) for arg in command[2::2])
    assert command[1::2] == ["-c"] * len(settings)
    assert settings["shared_buffers"] == "${POSTGRES_SHARED_BUFFERS:-1GB}"
    assert settings["shared_preload_libraries"] == "pg_prewarm"


def test_the_api_and_the_mcp_server_are_published_on_loopback_only_where_they_listen() -> None:
    serving = {"noema_api": "NOEMA_API", "noema_mcp": "NOEMA_MCP"}
    for module, prefix in serving.items():
        s = noema_services()[module]
        port = s["environment"][f"{prefix}_PORT"]
        assert s["environment"][f"{prefix}_HOST"] == "0.0.0.0"  # inside the container, else unreachable
        assert s["ports"] == [f"127.0.0.1:{port}:{port}"]
        [url] = re.findall(r"http://[^'\"]+", " ".join(s["healthcheck"]["test"]))
        probe = urlsplit(url)
        assert (probe.port, probe.path in PROBE_PATHS[module]) == (int(port), True)
    published = {module_of(s["command"]) for s in SERVICES_OF_COMPOSE.values() if s.get("ports")}
    assert published == set(serving), "only the API and the MCP server are published"
    mcp = noema_services()["noema_mcp"]["environment"]
    assert mcp["NOEMA_MCP_TRANSPORT"] == "http"
    assert mcp["NOEMA_MCP_TOKEN"].startswith("${MCP_TOKEN:?")  # required: it listens beyond loopback


def test_every_dependency_exists_can_become_healthy_and_none_loops() -> None:
    for s in SERVICES_OF_COMPOSE.values():
        test = s.get("healthcheck", {}).get("test", [])
        if "noemactl" in test:
            check_noemactl(test[test.index("noemactl") :])
        for name, condition in s.get("depends_on", {}).items():
            assert name in SERVICES_OF_COMPOSE
            if condition["condition"] == "service_healthy":
                assert "healthcheck" in SERVICES_OF_COMPOSE[name], name

    def reaches(start: str, seen: tuple[str, ...]) -> None:
        for name in SERVICES_OF_COMPOSE[start].get("depends_on", {}):
            assert name not in seen, f"dependency loop {(*seen, name)}"
            reaches(name, (*seen, name))

    for name in SERVICES_OF_COMPOSE:
        reaches(name, (name,))


def test_every_worker_is_probed_on_its_metrics_port_without_starting_the_cli() -> None:
    """A worker's healthcheck asks its own /readyz on NOEMA_METRICS_PORT (noema.runtime.probes), as
    the Kubernetes readinessProbe does; no healthcheck starts `noemactl` (a Python CLI every few
    seconds per container, issue 32)."""
    for module, s in noema_services().items():
        test = s.get("healthcheck", {}).get("test", [])
        assert "noemactl" not in " ".join(test), module
        if module in ("noema_api", "noema_mcp"):
            continue
        assert test[:3] == ["CMD", "python", "-c"], module
        [url] = re.findall(r"http://[^'\"]+", test[3])
        probe = urlsplit(url)
        assert probe.hostname == "127.0.0.1"
        assert probe.port == int(s["environment"]["NOEMA_METRICS_PORT"]), module
        assert probe.path == "/readyz", module
        assert probe.path in PROBE_PATHS[module], module
    for s in SERVICES_OF_COMPOSE.values():
        assert "noemactl" not in s.get("healthcheck", {}).get("test", [])
