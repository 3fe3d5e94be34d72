"""The deployment artefacts read as data, and the facts of the code they must agree with."""

from __future__ import annotations

import copy
import functools
import importlib.util
import re
from pathlib import Path
from typing import Any

import typer.main
import yaml

from noema.runtime.probes import PATHS as WORKER_PROBE_PATHS
from noema.runtime.settings import Settings
from noema_api.routes import ENDPOINTS
from noema_cli.main import app
from noema_cli.supervisor import SERVICES
from noema_mcp import HEALTH_PATHS

__all__ = [
    "CLAIMED",
    "DEPLOY",
    "KNOWN_VARIABLES",
    "MCP_VARIABLES",
    "NATS_AUTH_VARIABLES",
    "PROBE_PATHS",
    "PROCESSES",
    "PUBLIC_GET_PATHS",
    "check_noemactl",
    "container",
    "documents",
    "environment",
    "load",
    "module_of",
    "of_kind",
    "pod_labels",
    "quantity",
    "selects",
    "unresolved",
]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NATS_AUTH_VARIABLES = {
    "NOEMA_NATS_USER",
    "NOEMA_NATS_PASSWORD",
    "NOEMA_NATS_CREDS",
    "NOEMA_NATS_TLS_CA",
    "NOEMA_NATS_TLS_CERT",
    "NOEMA_NATS_TLS_KEY",
}
"""How a process authenticates to NATS (unset by default, so not in ``Settings().to_env()``)."""
MCP_VARIABLES = {
    str(p.envvar)
    for p in typer.main.get_command(app).commands["mcp"].commands["serve"].params  # type: ignore[attr-defined]
    if p.envvar
}
"""What ``noemactl mcp serve`` (``python -m noema_mcp``) reads besides the settings: its identity,
transport and token."""
KNOWN_VARIABLES = (
    set(Settings().to_env())
    | {
        "NOEMA_NATS_URL",
        "NOEMA_DATABASE_URL",
        "NOEMA_DATABASE_URL_PROJECTOR",
        "NOEMA_DATABASE_URL_READER",
        "NOEMA_API_TOKENS",
        "NOEMA_METRICS_PORT",
    }
    | NATS_AUTH_VARIABLES
    | MCP_VARIABLES
)
"""Every variable a Noema process reads (the settings, the server URLs, NATS credentials, the API's
tokens file, the metrics port, unset by default; the MCP server's own)."""
PUBLIC_GET_PATHS = {e.path for e in ENDPOINTS if e.public and e.method == "GET"}
"""API paths answered without a token: the only ones a probe can use."""
PROBE_PATHS = {
    "noema_api": PUBLIC_GET_PATHS,
    "noema_mcp": set(HEALTH_PATHS),
    **{module: set(WORKER_PROBE_PATHS) for module in SERVICES.values() if module != "noema_api"},
}
"""What a probe of each serving process may ask for (without a token): a worker's on its metrics
port (noema.runtime.probes)."""
PROCESSES = {**SERVICES, "mcp": "noema_mcp"}
"""Every process deployed, by name: those ``noemactl up`` runs, and the MCP server over HTTP (which
``up`` leaves to MCP hosts, who start it over stdio)."""
CLAIMED = {"noema_projector", "noema_attend", "noema_conflicts"}
"""Workers that work under claims (noema.runtime.claims, noema.runtime.partitions): several
replicas, each partition (the projector's one) worked by one of them at a time; never autoscaled
(more replicas than partitions would only stand by)."""


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML has it


@functools.cache
def _parsed(text: str) -> tuple[Any, ...]:
    """The documents of a YAML text, parsed once per test process (each caller gets its own copy)."""
    return tuple(d for d in yaml.load_all(text, Loader=_LOADER) if d)


def load(path: Path) -> Any:
    """One YAML document."""
    [doc] = _parsed(path.read_text()) or (None,)
    return copy.deepcopy(doc)


def documents(directory: Path) -> list[dict[str, Any]]:
    """Every document a kustomization lists, following resources that are kustomizations themselves."""
    kustomization = load(directory / "kustomization.yaml")
    docs: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        path = (directory / name).resolve()
        if path.is_dir():
            docs += documents(path)
        else:
            docs += copy.deepcopy(list(_parsed(path.read_text())))
    return docs


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The documents of one kind."""
    return [d for d in docs if d["kind"] == kind]


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    """The one container of a Deployment's pods."""
    only: dict[str, Any]
    [only] = deployment["spec"]["template"]["spec"]["containers"]
    return only


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    """The labels of a Deployment's pods."""
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (``matchLabels`` only, as the manifests use) selects ``labels``."""
    assert set(selector) <= {"matchLabels"}, selector
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def environment(docs: list[dict[str, Any]], deployment: dict[str, Any]) -> dict[str, str]:
    """The variables a Deployment's container gets: its ConfigMaps and Secrets (``envFrom``), then its
    own ``env`` (a value taken from elsewhere shows as ``<from ...>``)."""
    sources = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("ConfigMap", "Secret")}
    result: dict[str, str] = {}
    for ref in container(deployment).get("envFrom", []):
        [(key, named)] = ref.items()
        source = sources["ConfigMap" if key == "configMapRef" else "Secret", named["name"]]
        result |= source.get("data", {}) | source.get("stringData", {})
    for e in container(deployment).get("env", []):
        result[e["name"]] = e["value"] if "value" in e else f"<from {e['valueFrom']}>"
    return result


def module_of(command: list[str]) -> str:
    """The module of a ``python -m <module>`` command, which must be importable."""
    python, flag, module = command
    assert (python, flag) == ("python", "-m"), command
    assert importlib.util.find_spec(module) is not None, module
    return module


def check_noemactl(command: list[str]) -> None:
    """``command`` is a ``noemactl`` command line its parser accepts (command and options exist)."""
    assert command[0] == "noemactl", command
    commands = getattr(typer.main.get_command(app), "commands", {})
    sub = commands.get(command[1])
    assert sub is not None, f"noemactl has no command {command[1]!r}"
    sub.make_context(command[1], list(command[2:]))  # raises on an unknown option or argument


_UNITS = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9}


def quantity(value: str | int | float) -> float:
    """A Kubernetes quantity (``500m``, ``2Gi``, ``1``) as a number."""
    text = str(value)
    for unit in sorted(_UNITS, key=len, reverse=True):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * _UNITS[unit]
    return float(text)


def unresolved(value: str) -> str:
    """A compose value with its ``${VARIABLE...}`` interpolations replaced by a plain word."""
    return re.sub(r"\$\{[^}]*\}", "interpolated", value)
