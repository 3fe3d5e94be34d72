"""Every Noema process scores with single-threaded OpenBLAS (its spinning threads doubled a
search's CPU): importing any service's code before NumPy is enough."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import importlib, sys, ctypes
importlib.import_module(sys.argv[1])
import numpy
maps = open("/proc/self/maps").read()
[lib] = sorted({line.split()[-1] for line in maps.splitlines() if "openblas" in line.lower()})
print(ctypes.CDLL(lib).scipy_openblas_get_num_threads64_())
"""


@pytest.mark.parametrize("module", ["noema_api.app", "noema_retrieve.service", "noema.application.search"])
def test_openblas_runs_one_thread_in_noema_processes(module: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, module], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    assert out.stdout.strip() == "1"


def test_an_operators_choice_is_kept() -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "noema.application.search"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "2"
