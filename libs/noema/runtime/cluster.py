"""A NATS JetStream cluster on one machine: several embedded nats-servers on loopback.

For trying and testing Noema on more than one NATS server (``NOEMA_NATS_NODES=3 noemactl up``, the
cluster fault test): the servers route to one another on 127.0.0.1, each with its own name, ports
and JetStream store, all configured with the same users (the data folder's identities), so every
Noema process keeps its own identity whichever server it is connected to. A production cluster is
the official NATS Helm chart's (deploy/README.md), never this.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Sequence
from pathlib import Path

import nats
from nats.errors import Error as NatsError

from noema.runtime.credentials import CredentialStore
from noema.runtime.embedded import ClusterNode, EmbeddedNats, _Credentialed, free_port
from noema.runtime.identities import Identity

__all__ = ["EmbeddedCluster", "reload_embedded_nats"]


def _previous_route_port(conf: Path) -> int | None:
    # The route port an earlier run of the same data folder used (the cluster's own ports are
    # kept across restarts of `up`, as the client port is).
    try:
        found = re.search(r'^  listen: "127\.0\.0\.1:(\d+)"$', conf.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(found[1]) if found else None


class EmbeddedCluster(_Credentialed):
    """``size`` embedded nats-servers forming one JetStream cluster, ``noema-1`` … ``noema-<size>``.

    Its :attr:`url` lists every server, comma-separated (the form ``NOEMA_NATS_URL`` takes); each
    server is an :class:`~noema.runtime.embedded.EmbeddedNats` that a supervisor restarts on its own.
    """

    def __init__(
        self,
        data_dir: Path,
        size: int = 3,
        *,
        prefix: str = "noema",
        partitions: int = 1,
        extra: Sequence[Identity] = (),
    ) -> None:
        if size < 2:
            raise ValueError("a cluster has at least two servers")
        self.data_dir = data_dir
        password = CredentialStore(data_dir).route_password()
        previous = [_previous_route_port(data_dir / f"nats-{i}.conf") for i in range(1, size + 1)]
        ports = tuple(p if p is not None else free_port() for p in previous)
        self.nodes = [
            EmbeddedNats(
                data_dir,
                prefix=prefix,
                partitions=partitions,
                extra=extra,
                node=ClusterNode(i, ports, password),
            )
            for i in range(1, size + 1)
        ]

    @property
    def url(self) -> str:
        """Every server's client URL (without credentials), comma-separated."""
        return ",".join(node.url for node in self.nodes)

    def start(self, timeout: float = 60.0) -> None:
        """Start every server and wait until the cluster has elected its JetStream meta leader
        (before that, creating a stream is refused)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for node in self.nodes:
            node.start()
        if not asyncio.run(self._jetstream_ready(timeout)):
            self.stop()
            raise RuntimeError(
                f"the NATS cluster offered no JetStream within {timeout:g} s; see {self.data_dir}/nats-*.log"
            )

    async def _jetstream_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        nc = await nats.connect(self.operator_url.split(","), connect_timeout=2, max_reconnect_attempts=5)
        try:
            while time.monotonic() < deadline:
                with contextlib.suppress(NatsError, TimeoutError):
                    await nc.jetstream().account_info()
                    return True
                await asyncio.sleep(0.25)
            return False
        finally:
            await nc.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every server (SIGTERM at once to all, so none waits for another's shutdown)."""
        for node in self.nodes:
            node.terminate()
        for node in self.nodes:
            node.stop(timeout)

    def reload(self) -> bool:
        """Rewrite every server's configuration and make the running ones load it; True when all
        of them did."""
        reloaded = [node.reload() for node in self.nodes]  # every one, not up to the first refusal
        return all(reloaded)


def reload_embedded_nats(data_dir: Path, prefix: str = "noema", partitions: int = 1) -> bool:
    """After the identities changed (an agent added or removed): rewrite the configuration of the
    data folder's embedded NATS — the single server, or every server of its cluster — and make the
    running servers load it. True when a running server (every one, for a cluster) reloaded it."""
    nodes = list(data_dir.glob("nats-[0-9]*.conf"))
    single = data_dir / "nats.conf"
    # A data folder that ran both ways has both files: the newer kind is the one in use.
    if len(nodes) >= 2 and (not single.exists() or nodes[0].stat().st_mtime > single.stat().st_mtime):
        return EmbeddedCluster(data_dir, len(nodes), prefix=prefix, partitions=partitions).reload()
    return EmbeddedNats(data_dir, prefix=prefix, partitions=partitions).reload()
