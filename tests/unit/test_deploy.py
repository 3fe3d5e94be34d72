"""The Kubernetes manifests agree with the code: every process `noemactl up` runs has a Deployment,
commands name real modules, environment variables are ones Noema reads, the projector stays single."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

from noema.settings import Settings
from noema_cli.supervisor import SERVICES

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
KNOWN = set(Settings().to_env()) | {"NOEMA_NATS_URL", "NOEMA_DATABASE_URL", "NOEMA_API_TOKENS"}


def documents() -> list[dict]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    docs = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]
    return docs


def test_every_process_has_a_deployment_running_a_real_module() -> None:
    deployments = {d["metadata"]["name"]: d for d in documents() if d["kind"] == "Deployment"}
    modules = {}
    for d in deployments.values():
        [container] = d["spec"]["template"]["spec"]["containers"]
        python, flag, module = container["command"]
        assert (python, flag) == ("python", "-m")
        assert importlib.util.find_spec(module) is not None, module
        modules[module] = d
    assert set(SERVICES.values()) == set(modules)
    assert modules["noema_projector"]["spec"]["replicas"] == 1
    assert modules["noema_projector"]["spec"]["strategy"]["type"] == "Recreate"


def test_configuration_names_only_variables_noema_reads() -> None:
    docs = documents()
    names = set()
    for d in docs:
        if d["kind"] == "ConfigMap":
            names |= set(d["data"])
        if d["kind"] == "Secret" and d["metadata"]["name"] == "noema-database":
            names |= set(d["stringData"])
        if d["kind"] == "Deployment":
            for c in d["spec"]["template"]["spec"]["containers"]:
                names |= {e["name"] for e in c.get("env", [])}
    assert names <= KNOWN, names - KNOWN
    assert {"NOEMA_NATS_URL", "NOEMA_DATABASE_URL"} <= names


def test_the_api_service_reaches_the_api_port() -> None:
    docs = documents()
    [service] = [d for d in docs if d["kind"] == "Service"]
    [api] = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "noema-api"]
    [container] = api["spec"]["template"]["spec"]["containers"]
    assert service["spec"]["selector"] == api["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["ports"][0]["targetPort"] in {p["name"] for p in container["ports"]}
