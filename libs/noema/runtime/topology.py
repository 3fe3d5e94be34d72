"""Stream, subject and consumer names; subjects carry workspace and mind (requirements §1)."""

from __future__ import annotations

from dataclasses import dataclass

from noema_events import Event, EventDecodeError, Recorded, decode_recorded

__all__ = ["Topology"]


@dataclass(frozen=True)
class Topology:
    """Names derived from one prefix, so tests (and tenants of a shared NATS) never collide.

    Observations: ``<prefix>.obs.<workspace>.<mind>``; events:
    ``<prefix>.evt.<workspace>.<mind>.<event_name>`` (``_`` for a workspace-wide mind);
    dead letters: ``<prefix>.dlq.<source>``.
    """

    prefix: str = "noema"

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
        """Filter matching observations but not recall candidates."""
        return f"{self.prefix}.obs.*.*"

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
