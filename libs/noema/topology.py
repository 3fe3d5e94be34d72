"""Stream, subject and consumer names; subjects carry workspace and mind (requirements §1), and,
once the observations are partitioned, the workspace's partition (docs/architecture.md#partitions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from noema.records import dataclass

if TYPE_CHECKING:  # the codec loads with the first decode: the settings hold a Topology (issue 32)
    from noema_events import Event, Recorded

__all__ = ["MAX_ATOMIC_BATCH", "MAX_PARTITIONS", "Topology", "partition_of"]

MAX_ATOMIC_BATCH = 1000
"""The most messages one atomic batch publish may carry (NATS's default limit): the stream adapter
stores bigger lists in chunks of this size, and attention splits a bigger cycle."""

MAX_PARTITIONS = 64
"""The most partitions a deployment may configure (``NOEMA_PARTITIONS``)."""

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def partition_of(workspace: str, partitions: int) -> int:
    """The partition of ``workspace`` among ``partitions``: exactly the token NATS computes for
    ``{{partition(partitions,1)}}`` in a subject transform (32-bit FNV-1a of the token's UTF-8 bytes,
    modulo the count), so Python and the server always agree on where a workspace lives."""
    h = _FNV_OFFSET
    for byte in workspace.encode():
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return h % partitions


@dataclass(frozen=True)
class Topology:
    """Names derived from one prefix, so tests (and tenants of a shared NATS) never collide.

    Observations: ``<prefix>.obs.<workspace>.<mind>``; events:
    ``<prefix>.evt.<workspace>.<mind>.<event_name>`` (``_`` for a workspace-wide mind);
    dead letters: ``<prefix>.dlq.<source>``.

    With ``partitions`` P > 1, the observation stream stores what is published on
    ``<prefix>.obs.<workspace>.<mind>[.recall]`` under
    ``<prefix>.obs_part.<P>.<partition>.<workspace>.<mind>[.recall]``: a subject transform of the
    stream itself (NATS computes the partition, :func:`partition_of`), so publishers change nothing
    and every observation of a workspace lands in one partition, in stream order. With P = 1 (the
    default) nothing is transformed: subjects, consumers and claims are those of a single partition.
    """

    prefix: str = "noema"
    partitions: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.partitions <= MAX_PARTITIONS:
            raise ValueError(f"partitions must be 1 to {MAX_PARTITIONS}, not {self.partitions}")

    @property
    def partitioned(self) -> bool:
        """Whether observations are stored by partition (P > 1)."""
        return self.partitions > 1

    def partition(self, workspace: str) -> int:
        """The partition ``workspace`` belongs to (0 when not partitioned)."""
        return partition_of(workspace, self.partitions)

    @property
    def partitioned_observations(self) -> str:
        """The first tokens of every stored, partitioned observation subject (any partition count)."""
        return f"{self.prefix}.obs_part"

    @property
    def observation_transform(self) -> tuple[str, str] | None:
        """The observation stream's subject transform (source, destination), None when P = 1."""
        if not self.partitioned:
            return None
        p = self.partitions
        return (
            f"{self.prefix}.obs.*.>",
            f"{self.partitioned_observations}.{p}.{{{{partition({p},1)}}}}.{{{{wildcard(1)}}}}.>",
        )

    def partition_observations(self, partition: int) -> str:
        """Filter over one partition's stored observations and recall candidates (this layout)."""
        return f"{self.partitioned_observations}.{self.partitions}.{partition}.>"

    def stored_observation_subjects(self, partitions: int) -> str:
        """Filter over the observations stored under another partition count (an earlier layout);
        1 is the unpartitioned layout."""
        if partitions == 1:
            return self.observation_subjects
        return f"{self.partitioned_observations}.{partitions}.>"

    def workspace_observations(self, workspace: str) -> list[str]:
        """Filters over one workspace's stored observations (not its recall candidates): as
        published, and as stored under any partition count."""
        return [f"{self.prefix}.obs.{workspace}.*", f"{self.partitioned_observations}.*.*.{workspace}.*"]

    def published_subject(self, subject: str) -> str:
        """The subject a stored observation was published on (the partition tokens removed);
        any other subject unchanged."""
        head = self.partitioned_observations + "."
        if not subject.startswith(head):
            return subject
        parts = subject[len(head) :].split(".", 2)
        return f"{self.prefix}.obs.{parts[2]}" if len(parts) == 3 else subject

    def workspace_of_subject(self, subject: str) -> str | None:
        """The workspace an observation or event subject names, as published or as stored."""
        parts = self.published_subject(subject).split(".")
        if len(parts) >= 4 and parts[0] == self.prefix and parts[1] in ("obs", "evt"):
            return parts[2]
        return None

    def partitioned_durable(self, worker: str, partition: int) -> str:
        """Durable consumer name of one partition of a partitioned worker (``durable`` when P = 1)."""
        if not self.partitioned:
            return self.durable(worker)
        return self.durable(f"{worker}_{self.partitions}_{partition}")

    def layout_of_durable(self, worker: str, name: str) -> int | None:
        """The partition count a durable of ``worker`` was made for (1: the unpartitioned one),
        None for another consumer."""
        if name == self.durable(worker):
            return 1
        head = self.durable(worker) + "_"
        count, _, index = name.removeprefix(head).partition("_")
        if name.startswith(head) and count.isdigit() and index.isdigit():
            return int(count)
        return None

    @property
    def observation_stream(self) -> str:
        """Stream holding observations."""
        return f"{self.prefix.upper()}_OBSERVATIONS"

    @property
    def event_stream(self) -> str:
        """Stream holding every state change (the source of truth)."""
        return f"{self.prefix.upper()}_EVENTS"

    @property
    def dead_letter_stream(self) -> str:
        """Stream keeping rejected messages with their reason, so bad input loses nothing."""
        return f"{self.prefix.upper()}_DEADLETTER"

    @property
    def health_bucket(self) -> str:
        """Key-value bucket of the processes' heartbeats (JetStream stream ``KV_<bucket>``)."""
        return f"{self.prefix.upper()}_HEALTH"

    @property
    def health_stream(self) -> str:
        """The JetStream stream behind :attr:`health_bucket`."""
        return f"KV_{self.health_bucket}"

    def heartbeat_subject(self, worker: str, instance: str) -> str:
        """Subject (= KV key ``<worker>.<instance>``) of one process's heartbeat."""
        return f"$KV.{self.health_bucket}.{worker}.{instance}"

    @property
    def vector_stream(self) -> str:
        """Stream caching recently computed passage vectors (noema.adapters.vector_cache)."""
        return f"{self.prefix.upper()}_VECTORS"

    @property
    def vector_subjects(self) -> str:
        """Wildcard over the vector cache's subjects."""
        return f"{self.prefix}.vec.>"

    def vector_subject(self, key: str) -> str:
        """Subject holding the cached vector of one document (``key``: a hash of model and text)."""
        return f"{self.prefix}.vec.{key}"

    @property
    def observation_subjects(self) -> str:
        """Wildcard over all observation subjects."""
        return f"{self.prefix}.obs.>"

    @property
    def event_subjects(self) -> str:
        """Wildcard over all event subjects."""
        return f"{self.prefix}.evt.>"

    @property
    def dead_letter_subjects(self) -> str:
        """Wildcard over all dead-letter subjects."""
        return f"{self.prefix}.dlq.>"

    def observation_subject(self, workspace: str, mind: str) -> str:
        """Subject of one mind's observations."""
        return f"{self.prefix}.obs.{workspace}.{mind or '_'}"

    def recall_subject(self, workspace: str, mind: str) -> str:
        """Subject of recall candidates for one mind (on the observation stream, beside observations)."""
        return f"{self.prefix}.obs.{workspace}.{mind or '_'}.recall"

    @property
    def observations_only(self) -> str:
        """Filter matching observations but not recall candidates (as published)."""
        return f"{self.prefix}.obs.*.*"

    @property
    def stored_observations_only(self) -> str | list[str]:
        """Filter matching stored observations but not recall candidates: unpartitioned, and with
        partitions also as stored under any partition count."""
        if not self.partitioned:
            return self.observations_only
        return [self.observations_only, f"{self.partitioned_observations}.*.*.*.*"]

    def event_subject(self, event: Event) -> str:
        """Subject an event is published on."""
        return self.event_subject_for(event.workspace, event.mind, event.name)

    def workspace_event_subjects(self, workspace: str) -> str:
        """Wildcard over every event subject of one workspace."""
        return f"{self.prefix}.evt.{workspace}.>"

    def event_subject_for(self, workspace: str, mind: str, name: str) -> str:
        """Subject of events named ``name`` (e.g. ``working_memory.updated``) of one mind."""
        return f"{self.prefix}.evt.{workspace}.{mind or '_'}.{name.replace('.', '_')}"

    def event_on_subject(self, data: bytes, subject: str) -> Event:
        """Decode an event read from the event stream, refusing one stored under another subject
        than its own (a body naming another workspace, mind or type than its subject would bypass
        every subject-based permission and filter). Raises ``EventDecodeError`` with the reason."""
        return self.recorded_on_subject(data, subject)[0]

    def recorded_on_subject(self, data: bytes, subject: str) -> tuple[Event, Recorded | None]:
        """Like :meth:`event_on_subject`, and the event as recorded when it was an earlier version
        (:func:`noema_events.decode_recorded`), which the projection's audit copy keeps."""
        from noema_events.codec import EventDecodeError, decode_recorded

        event, recorded = decode_recorded(data)
        expected = self.event_subject(event)
        if subject != expected:
            raise EventDecodeError(f"subject {subject} does not match the event's own subject {expected}")
        return event, recorded

    def dead_letter_subject(self, source: str) -> str:
        """Subject for messages rejected by ``source`` (e.g. ``attend``)."""
        return f"{self.prefix}.dlq.{source}"

    def durable(self, worker: str) -> str:
        """Durable consumer name of a worker."""
        return f"{self.prefix}_{worker}"
