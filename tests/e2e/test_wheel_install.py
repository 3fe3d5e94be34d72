"""Noema as a user installs it: the two wheels built from this tree and the pinned runtime
dependencies in a fresh venv outside the repository, then `noemactl up`, observe and search from
another folder, with nothing of the repository (sources, .venv) on the path."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from noema.runtime.embedded import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "libs", "schemas", "services", "sdk")
"""What deploy/Dockerfile builds the wheels from."""

OWNERS = """
import importlib.metadata, json
owners = importlib.metadata.packages_distributions()
print(json.dumps({m: sorted(set(d)) for m, d in owners.items() if m.startswith("noema")}))
"""


@pytest.fixture(scope="module")
def place() -> Iterator[Path]:
    """A folder outside the repository and outside /root (the embedded PostgreSQL's system user
    must reach its data)."""
    path = Path(tempfile.mkdtemp(prefix="noema-wheel-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def wheels(place: Path) -> dict[str, Path]:
    """The wheels, built with pip from a copy of the sources (the repository gets no build/)."""
    src = place / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
    out = place / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out), ".", "./sdk"], src)
    built = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    assert set(built) == {"noema", "noema_sdk"}, built
    return built


@pytest.fixture(scope="module")
def venv(place: Path, wheels: dict[str, Path]) -> Path:
    """A fresh venv with the wheels and requirements-runtime.lock (as the image installs them)."""
    env = place / "venv"
    run([sys.executable, "-m", "venv", str(env)], place)
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    run([*pip, "-r", str(ROOT / "requirements-runtime.lock")], place)
    run([*pip, "--no-deps", *map(str, wheels.values())], place)
    return env


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
    return done.stdout


def user_env(venv: Path, data_dir: Path) -> dict[str, str]:
    """A user's environment: the venv's bin first, nothing of the repository, no NOEMA_ settings but
    the data folder (and a free API port)."""
    dev_bin = str(Path(sys.executable).parent)
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NOEMA_", "PYTHON", "VIRTUAL_ENV", "PYTEST", "XDG_RUNTIME_DIR"))
    }
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != dev_bin]
    runtime = data_dir.parent / "xdg-runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return keep | {
        "PATH": os.pathsep.join([str(venv / "bin"), *path]),
        "NOEMA_DATA_DIR": str(data_dir),
        "NOEMA_API_PORT": str(free_port()),
        "XDG_RUNTIME_DIR": str(runtime),
    }


def stop(up: subprocess.Popen[bytes]) -> tuple[int, list[str]]:
    """Ctrl-C, as a user stops `up`: its exit code and whatever of its process tree outlived it
    (killed, so a failure leaves no server behind)."""
    children = psutil.Process(up.pid).children(recursive=True)
    up.send_signal(signal.SIGINT)
    try:
        code = up.wait(60)
    except subprocess.TimeoutExpired:
        up.kill()
        code = up.wait()
    _, alive = psutil.wait_procs(children, timeout=10)
    left = []
    for p in alive:
        left.append(" ".join(p.cmdline()))
        p.kill()
    return code, left


def test_no_module_is_shipped_by_both_wheels_and_each_carries_the_license(wheels: dict[str, Path]) -> None:
    files: dict[str, list[str]] = {}
    for name, wheel in wheels.items():
        with zipfile.ZipFile(wheel) as z:
            files[name] = [n for n in z.namelist() if ".dist-info/" not in n and ".data/" not in n]
            info = next(n.split("/")[0] for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            metadata = z.read(f"{info}/METADATA").decode()
            assert "License-Expression: Apache-2.0" in metadata.splitlines()
            assert "License-File: LICENSE" in metadata.splitlines()
            assert z.read(f"{info}/licenses/LICENSE").decode() == (ROOT / "LICENSE").read_text()
    assert not set(files["noema"]) & set(files["noema_sdk"])
    assert {n.split("/")[0] for n in files["noema_sdk"]} == {"noema_sdk"}
    with zipfile.ZipFile(wheels["noema"]) as z:
        requires = z.read("noema-0.1.0.dist-info/METADATA").decode().splitlines()
        assert "Requires-Dist: noema-sdk==0.1.0" in requires
        schemas = [n for n in z.namelist() if n.startswith("noema-0.1.0.data/data/share/noema/schemas/")]
        assert any(n.endswith("/asyncapi.json") for n in schemas)
        assert any(n.endswith("/openapi.json") for n in schemas)


def test_the_installed_venv_is_consistent_and_each_module_has_one_distribution(
    venv: Path, place: Path
) -> None:
    python = str(venv / "bin" / "python")
    run([python, "-m", "pip", "check"], place)
    owners: dict[str, list[str]] = json.loads(run([python, "-c", OWNERS], place))
    assert owners["noema_sdk"] == ["noema-sdk"]
    assert {m: d for m, d in owners.items() if len(d) != 1} == {}
    assert all(d == ["noema"] for m, d in owners.items() if m != "noema_sdk")
    assert (venv / "share" / "noema" / "schemas" / "asyncapi.json").is_file()
    assert len(list((venv / "share" / "noema" / "schemas" / "json").glob("*.json"))) >= 20


def test_up_observe_search_and_a_clean_stop_from_the_installed_wheels(venv: Path, place: Path) -> None:
    elsewhere = place / "elsewhere"  # neither the repository nor the venv: a user's own folder
    elsewhere.mkdir()
    env = user_env(venv, place / "data")
    where = run(
        ["python", "-c", "import noema, noema_sdk; print(noema.__file__, noema_sdk.__file__)"], elsewhere, env
    )
    assert all(p.startswith(str(venv)) for p in where.split()), where

    def ctl(*args: str) -> Any:
        return json.loads(run(["noemactl", *args, "--json"], elsewhere, env))

    log = place / "up.log"  # a file, not a pipe: nobody reads a pipe while `up` runs
    with log.open("w") as out:
        up = subprocess.Popen(
            ["noemactl", "up"], cwd=elsewhere, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert up.poll() is None, f"noemactl up exited with {up.returncode}"
            status = subprocess.run(
                ["noemactl", "status"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60
            )
            if status.returncode == 0:
                break
            assert time.monotonic() < deadline, f"not healthy within 120 s:\n{status.stdout}{status.stderr}"
            time.sleep(0.5)
        observed = ctl("observe", "the deploy key rotates on Fridays", "-w", "acme", "--mind", "ops")
        assert observed["duplicate"] is False
        hits: list[dict[str, Any]] = []
        deadline = time.monotonic() + 10
        while not hits and time.monotonic() < deadline:
            hits = ctl("memory", "search", "deploy key", "-w", "acme", "--mode", "keyword")["results"]
        assert [h["content"] for h in hits] == ["the deploy key rotates on Fridays"]
    finally:
        code, left = stop(up)
    assert code == 0, log.read_text()[-4000:]
    assert not left, f"left running after stop: {left}"
    assert not (elsewhere / "var").exists(), "the data went to the working folder, not NOEMA_DATA_DIR"
