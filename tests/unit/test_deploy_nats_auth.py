"""The deployed NATS requires credentials with the embedded server's permissions: the generated
authorization files are current, every Noema process (compose and Kubernetes) connects as its own
user with its own password, and the streams are prepared by the operator before the workers run."""

from __future__ import annotations

import re
from typing import Any

import yaml

from noema.runtime.identities import OPERATOR, SERVICES, password_variable, service_user
from noema.runtime.natsconfig import PASSWORDS_SECRET, auth_conf, auth_values

from .deploy_files import DEPLOY, PROCESSES, check_noemactl, container, documents, load, module_of, of_kind

COMPOSE: dict[str, dict[str, Any]] = load(DEPLOY / "compose.yaml")["services"]
MODULE_TO_NAME = {module: name for name, module in PROCESSES.items()}


def test_the_generated_authorization_files_are_current() -> None:
    assert (DEPLOY / "nats" / "auth.conf").read_text() == auth_conf(), "run `make deploy-auth`"
    assert (DEPLOY / "nats" / "auth-values.yaml").read_text() == auth_values(), "run `make deploy-auth`"


def test_the_compose_server_includes_the_users_and_gets_every_password() -> None:
    nats = COMPOSE["nats"]
    config = (DEPLOY / "nats" / "nats.conf").read_text()
    [included] = re.findall(r"^include\s+\./(\S+)$", config, re.MULTILINE)
    mounts = dict(v.split(":")[:2] for v in nats["volumes"])
    assert mounts[f"./nats/{included}"] == f"/etc/nats/{included}"
    referenced = set(re.findall(r"password: \$(\w+)", (DEPLOY / "nats" / included).read_text()))
    assert referenced == {password_variable(n) for n in (*SERVICES, OPERATOR)}
    for variable in referenced:
        assert nats["environment"][variable].startswith(f"${{{variable}:?"), variable


def _compose_identity(service: dict[str, Any]) -> tuple[str, str]:
    env = service["environment"]
    password = re.fullmatch(r"\$\{(\w+):\?[^}]*\}", env["NOEMA_NATS_PASSWORD"])
    assert password, env["NOEMA_NATS_PASSWORD"]
    return env["NOEMA_NATS_USER"], password[1]


def test_every_compose_process_connects_as_its_own_user() -> None:
    seen = set()
    for service in COMPOSE.values():
        if service.get("command", [""])[0] != "python":
            continue
        name = MODULE_TO_NAME[module_of(service["command"])]
        assert _compose_identity(service) == (service_user(name), password_variable(name)), name
        seen.add(name)
    assert seen == set(PROCESSES)


def _waits_for(name: str, target: str) -> bool:
    deps = COMPOSE[name].get("depends_on", {})
    return target in deps or any(_waits_for(d, target) for d in deps)


def test_compose_prepares_the_streams_as_the_operator_before_any_worker() -> None:
    prepare = COMPOSE["prepare"]
    check_noemactl(prepare["command"])
    assert prepare["command"][:2] == ["noemactl", "prepare"]
    assert _compose_identity(prepare) == (service_user(OPERATOR), password_variable(OPERATOR))
    for name, service in COMPOSE.items():
        if service.get("command", [""])[0] == "python":
            assert _waits_for(name, "prepare"), name
    assert COMPOSE["attend"]["depends_on"]["prepare"] == {"condition": "service_completed_successfully"}


def _k8s_identity(pod: dict[str, Any]) -> tuple[str, str]:
    env = {e["name"]: e for e in container(pod)["env"]}
    ref = env["NOEMA_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == PASSWORDS_SECRET
    return env["NOEMA_NATS_USER"]["value"], ref["key"]


def test_every_kubernetes_process_connects_as_its_own_user() -> None:
    docs = documents(DEPLOY / "k8s")
    [secret] = [d for d in of_kind(docs, "Secret") if d["metadata"]["name"] == PASSWORDS_SECRET]
    assert set(secret["stringData"]) == {*SERVICES, OPERATOR}
    seen = set()
    for deployment in of_kind(docs, "Deployment"):
        name = MODULE_TO_NAME[module_of(container(deployment)["command"])]
        assert _k8s_identity(deployment) == (service_user(name), name), name
        seen.add(name)
    assert seen == set(PROCESSES)
    [job] = of_kind(docs, "Job")
    check_noemactl(container(job)["command"])
    assert container(job)["command"][:2] == ["noemactl", "prepare"]
    assert _k8s_identity(job) == (service_user(OPERATOR), OPERATOR)


def test_the_chart_gets_every_user_and_its_password_from_the_servers_secret() -> None:
    values = yaml.safe_load((DEPLOY / "nats" / "auth-values.yaml").read_text())
    users = values["config"]["merge"]["authorization"]["users"]
    assert [u["user"] for u in users] == [service_user(n) for n in (*SERVICES, OPERATOR)]
    env = values["container"]["env"]
    server_secret = yaml.safe_load((DEPLOY / "nats" / "secret.yaml").read_text())
    assert server_secret["metadata"] == {"name": PASSWORDS_SECRET, "namespace": "nats"}
    for name, user in zip((*SERVICES, OPERATOR), users, strict=True):
        variable = password_variable(name)
        assert user["password"] == f"<< ${variable} >>"
        assert env[variable]["valueFrom"]["secretKeyRef"] == {"name": PASSWORDS_SECRET, "key": name}
        assert name in server_secret["stringData"]
        allowed = user["permissions"]["publish"]["allow"]
        purgeable = {s.rsplit(".", 1)[1] for s in allowed if "STREAM.PURGE" in s}
        erasing = name in (OPERATOR, "api")  # an erasure empties the vector cache
        assert purgeable == ({"NOEMA_VECTORS"} if erasing else set())
        # Deleting a stream: only the operator, only the dead-letter stream and its upgrade copy.
        deletable = {s.rsplit(".", 1)[1] for s in allowed if "STREAM.DELETE" in s}
        assert deletable == ({"NOEMA_DEADLETTER", "NOEMA_DEADLETTER_MOVE"} if name == OPERATOR else set())
