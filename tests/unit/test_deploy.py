"""The Kubernetes manifests agree with the code: every process `noemactl up` runs, and the MCP server
over HTTP, has a Deployment running a real module with only variables Noema reads; probes use real
health checks; every pod has limits, a disruption budget and network policies; the single-process
workers stay single."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from noema.runtime.natsconfig import DEPLOY_PARTITIONS
from noema_api.auth import load_tokens

from .deploy_files import (
    CLAIMED,
    DEPLOY,
    KNOWN_VARIABLES,
    PROBE_PATHS,
    PROCESSES,
    check_noemactl,
    container,
    documents,
    environment,
    load,
    module_of,
    of_kind,
    pod_labels,
    quantity,
    selects,
)


def kind(name: str) -> list[dict[str, Any]]:
    return of_kind(documents(DEPLOY / "k8s"), name)


def by_module() -> dict[str, dict[str, Any]]:
    return {module_of(container(d)["command"]): d for d in kind("Deployment")}


def env(deployment: dict[str, Any]) -> dict[str, str]:
    return environment(documents(DEPLOY / "k8s"), deployment)


def test_every_process_has_a_deployment_running_a_real_module() -> None:
    deployments = by_module()
    assert set(PROCESSES.values()) == set(deployments)
    for module in CLAIMED:
        # Two replicas under claims: a standby or a partition's new owner takes over from the
        # replica that stops. The projector rolls (its standby is ready); the partitioned workers are
        # recreated (two partition counts never work at once: a new pod would wait, unready).
        assert deployments[module]["spec"]["replicas"] == 2, module
        rolls = module == "noema_projector"
        strategy = deployments[module]["spec"]["strategy"]
        assert strategy["type"] == ("RollingUpdate" if rolls else "Recreate"), module


def test_every_process_runs_the_partition_count_the_nats_users_allow() -> None:
    for d in kind("Deployment"):
        assert env(d)["NOEMA_PARTITIONS"] == str(DEPLOY_PARTITIONS), d["metadata"]["name"]


def test_every_process_gets_the_servers_and_only_variables_noema_reads() -> None:
    for d in kind("Deployment"):
        names = set(env(d))
        assert names <= KNOWN_VARIABLES, (d["metadata"]["name"], names - KNOWN_VARIABLES)
        assert {"NOEMA_NATS_URL", "NOEMA_DATABASE_URL"} <= names, d["metadata"]["name"]


SERVING = {"noema_api": "NOEMA_API", "noema_mcp": "NOEMA_MCP"}
"""The processes that serve requests, and the prefix of their HOST and PORT variables."""


def test_the_api_and_the_mcp_server_listen_where_their_services_and_probes_look() -> None:
    services = kind("Service")
    assert len(services) == len(SERVING)
    for module, prefix in SERVING.items():
        d = by_module()[module]
        [service] = [s for s in services if s["spec"]["selector"] == pod_labels(d)]
        ports = {p["name"]: p["containerPort"] for p in container(d)["ports"]}
        assert service["spec"]["ports"][0]["targetPort"] in ports
        assert env(d)[f"{prefix}_HOST"] == "0.0.0.0"  # else the Service reaches nothing
        assert {int(env(d)[f"{prefix}_PORT"])} == set(ports.values())


def test_the_mcp_server_serves_http_behind_a_token_as_one_agent() -> None:
    mcp = env(by_module()["noema_mcp"])
    assert mcp["NOEMA_MCP_TRANSPORT"] == "http"
    assert mcp["NOEMA_MCP_TOKEN"].startswith("<from {'secretKeyRef'")  # never a literal in the pod spec
    assert all(mcp[v] for v in ("NOEMA_WORKSPACE", "NOEMA_AGENT", "NOEMA_ROLE"))
    [secret] = [d for d in kind("Secret") if d["metadata"]["name"] == "noema-mcp"]
    assert "token" in secret["stringData"]


def test_the_api_tokens_secret_is_a_tokens_file_the_api_accepts(tmp_path: Path) -> None:
    api = by_module()["noema_api"]
    [secret] = [d for d in kind("Secret") if d["metadata"]["name"] == "noema-api-tokens"]
    [(key, content)] = secret["stringData"].items()
    tokens = tmp_path / key
    tokens.write_text(content)
    load_tokens(tokens)  # raises TokensError on a malformed file
    [mount] = [m for m in container(api)["volumeMounts"] if m["name"] == "tokens"]
    [volume] = [v for v in api["spec"]["template"]["spec"]["volumes"] if v["name"] == "tokens"]
    assert volume["secret"]["secretName"] == "noema-api-tokens"
    assert env(api)["NOEMA_API_TOKENS"] == f"{mount['mountPath']}/{key}"


def test_every_container_requests_resources_within_its_limits() -> None:
    for d in kind("Deployment"):
        resources = container(d)["resources"]
        for name in ("cpu", "memory"):
            request, limit = resources["requests"][name], resources["limits"][name]
            assert quantity(request) <= quantity(limit), (d["metadata"]["name"], name)


def check_probe(probe: dict[str, Any], spec: dict[str, Any], module: str) -> None:
    if "httpGet" in probe:
        assert probe["httpGet"]["path"] in PROBE_PATHS[module], probe  # a probe sends no token
        assert probe["httpGet"]["port"] in {p["name"] for p in spec.get("ports", [])}
    else:
        check_noemactl(probe["exec"]["command"])


def test_probes_use_only_health_checks_that_exist() -> None:
    for module, d in by_module().items():
        spec = container(d)
        assert "readinessProbe" in spec, d["metadata"]["name"]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            if probe in spec:
                check_probe(spec[probe], spec, module)
        # Every process has a liveness probe (checkov CKV_K8S_8). It restarts the pod, so it looks
        # at the process itself, never at the servers (an outage would restart every pod at once):
        # an HTTP path the process answers on its own, never a command (nor a CLI started per probe).
        assert "httpGet" in spec["livenessProbe"], d["metadata"]["name"]
        assert "exec" not in spec["readinessProbe"], d["metadata"]["name"]
    for module in set(by_module()) - {"noema_api", "noema_mcp"}:
        spec = container(by_module()[module])
        assert spec["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}, module
        assert spec["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}, module
    assert container(by_module()["noema_mcp"])["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_every_deployment_of_several_replicas_spreads_them_over_nodes() -> None:
    for d in kind("Deployment"):
        name = d["metadata"]["name"]
        if d["spec"].get("replicas", 2) < 2:  # no replicas: KEDA scales it, to several
            continue
        pod = d["spec"]["template"]["spec"]
        [spread] = pod["topologySpreadConstraints"]
        assert spread["topologyKey"] == "kubernetes.io/hostname", name
        assert spread["maxSkew"] == 1, name
        assert spread["whenUnsatisfiable"] == "ScheduleAnyway", name  # one node still runs them all
        assert spread["labelSelector"]["matchLabels"] == d["spec"]["selector"]["matchLabels"], name


def test_every_image_is_the_kustomization_images_entry_so_it_can_be_pinned_by_digest() -> None:
    kustomization = load(DEPLOY / "k8s" / "kustomization.yaml")
    [entry] = kustomization["images"]
    for workload in [*kind("Deployment"), *kind("Job")]:
        for spec in workload["spec"]["template"]["spec"]["containers"]:
            assert spec["image"] == entry["name"], workload["metadata"]["name"]


def test_every_deployment_has_one_disruption_budget_that_never_blocks_a_drain() -> None:
    budgets = kind("PodDisruptionBudget")
    for d in kind("Deployment"):
        [budget] = [b for b in budgets if selects(b["spec"]["selector"], pod_labels(d))]
        replicas = d["spec"].get("replicas", 1)  # unset: one, or what KEDA decides (at least one)
        if "minAvailable" in budget["spec"]:
            assert budget["spec"]["minAvailable"] < replicas, d["metadata"]["name"]
        else:
            assert budget["spec"]["maxUnavailable"] >= 1
    for b in budgets:
        assert any(selects(b["spec"]["selector"], pod_labels(d)) for d in kind("Deployment")), b


def _ingress_ports(d: dict[str, Any]) -> set[int]:
    """The ports the network policies let anything reach on ``d``'s pods."""
    policies = [p for p in kind("NetworkPolicy") if "Ingress" in p["spec"]["policyTypes"]]
    return {
        q["port"]
        for p in policies
        if selects(p["spec"]["podSelector"], pod_labels(d))
        for rule in p["spec"].get("ingress", [])
        for q in rule["ports"]
    }


def _served_port(module: str, d: dict[str, Any]) -> int:
    """Where a process serves requests and its metrics (the workers: their metrics port)."""
    return int(env(d)[f"{SERVING[module]}_PORT" if module in SERVING else "NOEMA_METRICS_PORT"])


def test_ingress_is_denied_except_to_the_serving_ports_and_the_metrics_ports() -> None:
    policies = [p for p in kind("NetworkPolicy") if "Ingress" in p["spec"]["policyTypes"]]
    [deny] = [p for p in policies if p["spec"]["podSelector"] == {}]
    assert not deny["spec"].get("ingress")
    for module, d in by_module().items():
        assert _served_port(module, d) in _ingress_ports(d), module
        assert _ingress_ports(d) <= {int(env(d)["NOEMA_METRICS_PORT"]), _served_port(module, d)}


def test_every_pod_announces_where_prometheus_scrapes_its_metrics() -> None:
    monitor = of_kind(documents(DEPLOY / "k8s" / "monitoring"), "PodMonitor")[0]["spec"]
    for module, d in by_module().items():
        annotations = d["spec"]["template"]["metadata"]["annotations"]
        ports = {p["name"]: p["containerPort"] for p in container(d)["ports"]}
        # The API and the MCP server serve them on their own port; every worker on
        # NOEMA_METRICS_PORT, on every interface.
        port = _served_port(module, d)
        if module not in SERVING:
            assert env(d)["NOEMA_METRICS_HOST"] == "0.0.0.0"
        assert annotations == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(port),
            "prometheus.io/path": "/metrics",
        }, module
        assert port in ports.values(), module
        assert selects(monitor["selector"], pod_labels(d)), module
        scraped = [e for e in monitor["podMetricsEndpoints"] if e["port"] in ports]
        assert [(ports[e["port"]], e["path"]) for e in scraped] == [(port, "/metrics")], module


def test_noema_pods_reach_only_dns_nats_and_postgresql() -> None:
    [egress] = [p for p in kind("NetworkPolicy") if "Egress" in p["spec"]["policyTypes"]]
    deployments = kind("Deployment")
    assert all(selects(egress["spec"]["podSelector"], pod_labels(d)) for d in deployments)
    nats = urlsplit(env(deployments[0])["NOEMA_NATS_URL"])
    database = urlsplit(env(deployments[0])["NOEMA_DATABASE_URL"])
    ports = {q["port"]: rule for rule in egress["spec"]["egress"] for q in rule["ports"]}
    assert set(ports) == {nats.port, database.port or 5432, 53}
    # The NATS URL names a service of another namespace (<service>.<namespace>.svc): only that one.
    assert nats.hostname is not None
    [to] = ports[nats.port]["to"]
    assert to["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": nats.hostname.split(".")[1]
    }


def test_every_process_signs_in_to_postgresql_as_the_role_of_its_kind_on_one_server() -> None:
    from noema.adapters.postgres.roles import DB_ROLES, DbRole

    script = (DEPLOY / "postgres" / "roles.sql").read_text()
    variables: list[tuple[DbRole, str]] = [
        ("owner", "NOEMA_DATABASE_URL"),
        ("projector", "NOEMA_DATABASE_URL_PROJECTOR"),
        ("reader", "NOEMA_DATABASE_URL_READER"),
    ]
    for d in kind("Deployment"):
        urls = {role: urlsplit(env(d)[var]) for role, var in variables}
        for role, url in urls.items():
            assert url.username == DB_ROLES[role], (d["metadata"]["name"], role)
            assert f"ALTER ROLE {DB_ROLES[role]} LOGIN" in script  # deploy/postgres/roles.sql makes it
            assert (url.hostname, url.port, url.path) == (
                urls["owner"].hostname,
                urls["owner"].port,
                urls["owner"].path,
            )
