"""Who may do what on NATS: one identity per Noema process and per agent, least privilege each.

Pure: the permissions are a table (:data:`ROWS`: per service, the event types it publishes, the
observation subjects and the JetStream API groups) expanded with the topology (the prefix, the
partitions) into exact subjects, and rendered as the ``authorization`` block of a nats-server config
(the embedded server's, and the deploy manifests' through :mod:`noema.runtime.natsconfig`);
:mod:`noema.runtime.credentials` keeps the passwords. docs/security.md shows the table;
tests/integration/test_identity_rows.py checks it on a real server.

No identity here may call ``$JS.API.STREAM.PURGE`` (but of the vector cache, a cache), nor
``$JS.API.STREAM.DELETE`` of the observation or event stream, and only the operator may create or
update streams (``noemactl up`` prepares them with it): a worker that could update a stream could
also shrink its limits and so lose the source of truth. The one stream deletion granted is the
operator's of the dead-letter stream and its temporary copy, which ``noemactl dlq upgrade``
recreates. Single observations are deleted by erasures only: the operator's and the projector's
(applying a recorded ``content.erased``); no process deletes another's durable consumer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import field

from noema.records import dataclass
from noema.topology import Topology

__all__ = [
    "OPERATOR",
    "ROWS",
    "SERVICES",
    "Identity",
    "Permissions",
    "Row",
    "agent_identity",
    "agent_user",
    "deploy_identities",
    "event_subject",
    "inbox_prefix",
    "password_variable",
    "render_authorization",
    "service_identity",
    "service_user",
    "shipped_allows",
    "subject_matches",
]


def inbox_prefix(user: str) -> str:
    """The reply-inbox prefix the server lets ``user`` subscribe below: the SDK's
    (:func:`noema_sdk.protocol.inbox_prefix`), loaded with the first call, as the protocol's
    Structs bring msgspec, which locating an instance (every ``noemactl`` command) does not need."""
    from noema_sdk.protocol import inbox_prefix as sdk_inbox_prefix

    return sdk_inbox_prefix(user)


SERVICES = ("attend", "projector", "embed", "retrieve", "decay", "conflicts", "api", "service", "mcp")
"""Every Noema process that connects to NATS with an identity of its own (``service`` is the NATS
agent service); the operator identity (``noemactl``) comes on top."""
OPERATOR = "operator"
PARTITIONED = ("attend", "conflicts")
"""The workers that consume one partition per consumer when ``NOEMA_PARTITIONS`` > 1."""

# Durable consumers per worker: (stream kind, worker name); the stream name follows the prefix.
_CONSUMERS: dict[str, tuple[str, ...]] = {
    "attend": ("observations",),
    "retrieve": ("observations",),
    "projector": ("events",),
    "embed": ("events",),
    "conflicts": ("events",),
}


@dataclass(frozen=True)
class Permissions:
    """Subjects an identity may publish to and subscribe to (nats-server semantics: deny wins)."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    deny_publish: tuple[str, ...] = ()
    allow_responses: bool = False
    """May reply to the requests it receives (the agent service answers agents this way)."""


@dataclass(frozen=True)
class Identity:
    """A NATS user: its name, its secret and what it may do."""

    user: str
    password: str = field(repr=False)
    permissions: Permissions | None
    """None: everything (only for identities a test creates, never shipped)."""


def service_user(name: str) -> str:
    """The NATS user of a Noema process (``noema-attend``) or of the operator (``noema-operator``)."""
    return f"noema-{name}"


def agent_user(workspace: str, agent: str) -> str:
    """The NATS user of one agent; dots keep it apart from every service user."""
    return f"agent.{workspace}.{agent}"


MOVE_SUFFIX = "_MOVE"
"""The dead-letter stream's temporary copy during ``noemactl dlq upgrade`` (noema.adapters.dlq_upgrade)."""


def _stream_info(topology: Topology) -> list[str]:
    streams = (
        topology.observation_stream,
        topology.event_stream,
        topology.dead_letter_stream,
        f"{topology.dead_letter_stream}{MOVE_SUFFIX}",  # ensure_streams checks for an upgrade
        topology.health_stream,
        topology.vector_stream,
    )
    return [f"$JS.API.STREAM.INFO.{s}" for s in streams]


def _durables(worker: str, topology: Topology) -> list[str]:
    """The durable consumers of ``worker``: one, or one per partition."""
    if worker in PARTITIONED and topology.partitioned:
        return [topology.partitioned_durable(worker, p) for p in range(topology.partitions)]
    return [topology.durable(worker)]


def _own_durables(worker: str, topology: Topology) -> list[str]:
    """The durable consumers ``worker`` may delete: those of its partition count and of every
    smaller count (1 the unpartitioned one)."""
    return [
        durable
        for count in range(1, topology.partitions + 1)
        for durable in _durables(worker, Topology(topology.prefix, count))
    ]


def _all_consumers_info(topology: Topology) -> list[str]:
    # /readyz (noema.runtime.readiness) weighs every worker's consumer.
    streams = {"observations": topology.observation_stream, "events": topology.event_stream}
    return [
        f"$JS.API.CONSUMER.INFO.{streams[kind]}.{durable}"
        for worker, kinds in _CONSUMERS.items()
        for kind in kinds
        for durable in _durables(worker, topology)
    ]


def _status_reader(topology: Topology) -> list[str]:
    # `noemactl status --expect <itself>` (a pod's probe, with the pod's identity): the heartbeats,
    # read with an ephemeral no-ack consumer on the bucket's stream, and attend's consumer (every
    # status looks at the observation backlog); a worker reads its own consumer through _consumer.
    health = topology.health_stream
    return [
        *(f"$JS.API.CONSUMER.INFO.{topology.observation_stream}.{d}" for d in _durables("attend", topology)),
        f"$JS.API.CONSUMER.CREATE.{health}",
        f"$JS.API.CONSUMER.CREATE.{health}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{health}.*",
        f"$JS.API.CONSUMER.DELETE.{health}.*",
    ]


def _consumer(stream: str, durable: str) -> list[str]:
    api = "$JS.API.CONSUMER"
    return [
        f"{api}.CREATE.{stream}.{durable}",
        f"{api}.CREATE.{stream}.{durable}.>",  # with its filter subject
        f"{api}.DURABLE.CREATE.{stream}.{durable}",
        f"{api}.INFO.{stream}.{durable}",
        f"{api}.MSG.NEXT.{stream}.{durable}",
        f"$JS.ACK.{stream}.{durable}.>",
    ]


def _events_read(topology: Topology) -> list[str]:
    # The last event on a subject (a mind's working memory, an agent's notes): message get.
    stream = topology.event_stream
    return [
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}.>",
    ]


def _dead_letters_admin(topology: Topology) -> list[str]:
    # Listing, showing and discarding dead letters (noemactl dlq, the API's endpoints).
    stream = topology.dead_letter_stream
    return [
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}.>",
        f"$JS.API.STREAM.MSG.DELETE.{stream}",
    ]


def _erasure(topology: Topology) -> list[str]:
    # An erasure (docs/privacy.md) deletes erased observations and empties the vector cache.
    return [
        f"$JS.API.STREAM.MSG.DELETE.{topology.observation_stream}",
        f"$JS.API.STREAM.PURGE.{topology.vector_stream}",
    ]


def _ephemeral_reader(topology: Topology) -> list[str]:
    # read_stream and the erasure's scan: an ephemeral consumer without acks, created without a name
    # (a named create could re-configure a worker's durable consumer) and never deleted (a deletion
    # cannot be told from a durable's by its subject): the server removes it once idle
    # (noema.adapters.jetstream.EPHEMERAL_IDLE_S).
    out = []
    for stream in (topology.event_stream, topology.dead_letter_stream, topology.observation_stream):
        out += [
            f"$JS.API.CONSUMER.CREATE.{stream}",
            f"$JS.API.CONSUMER.MSG.NEXT.{stream}.*",
            f"$JS.API.CONSUMER.INFO.{stream}.*",
        ]
    return out


# What each identity may do, as data. ``events``: the event types it publishes, each only on its own
# subject ``<prefix>.evt.<workspace>.<mind>.<event>`` (any workspace and mind: the services serve
# every workspace); ``observations``: which observation subjects it publishes on; ``jetstream``: the
# JetStream API groups below it may call (each an exact list of subjects, :data:`_JETSTREAM`). Every
# process also reads the streams' info and the heartbeats (``noemactl status`` runs with the pod's
# credentials), writes its own heartbeat and its own dead letters (``<prefix>.dlq.<name>``), and
# uses its own durable consumers (:data:`_CONSUMERS`). Each row is what its process publishes
# (the publish sites: noema.domain.attention, noema.application.upkeep/knowledge/curation/erasure,
# the services' own modules); tests/integration/test_identity_rows.py tries everything outside it.
_AGENT_EVENTS = (
    # What an agent's tools publish through the knowledge layer (noema.application.knowledge):
    # facts and their mentions, supersessions and conflicts (harmonize), policies, memories
    # (remember, consolidate), notes, the audit record of an action, and a domain created with its
    # first fact (its creator's grant).
    "fact.proposed",
    "fact.mentioned",
    "memory.superseded",
    "conflict.recorded",
    "policy.proposed",
    "policy.superseded",
    "memory.created",
    "notes.updated",
    "operator.action",
    "domain.created",
    "grant.changed",
)


@dataclass(frozen=True)
class Row:
    """What one identity may do besides what every process may (see the table's comment)."""

    events: tuple[str, ...] = ()
    observations: str = ""
    """``any``: ``<prefix>.obs.*.*`` (observations on behalf of authenticated callers); ``all``:
    ``<prefix>.obs.>`` (also recall subjects: re-publishing a dead letter on its subject);
    ``recall``: ``<prefix>.obs.*.*.recall``."""
    jetstream: tuple[str, ...] = ()


ROWS: dict[str, Row] = {
    "attend": Row(
        events=(
            "attention.decided",
            "memory.created",
            "memory.retrieved",
            "working_memory.updated",
            "relationship.added",
        ),
        jetstream=("events_read", "recreate_own_consumer"),
    ),
    "retrieve": Row(observations="recall", jetstream=("vector_cache",)),
    "projector": Row(jetstream=("recreate_own_consumer", "erase_observations")),
    "embed": Row(events=("memory.embedded",), jetstream=("vector_cache",)),
    "decay": Row(events=("activation.decayed",), jetstream=("events_read",)),
    "conflicts": Row(
        events=("conflict.recorded", "fact.mentioned", "memory.superseded"), jetstream=("events_read",)
    ),
    "api": Row(
        events=(*_AGENT_EVENTS, "workspace.configured", "content.erased"),
        observations="all",
        jetstream=(
            "events_read",
            "consumers_info",
            "dead_letters_admin",
            "ephemeral_reader",
            "purge_vector_cache",
        ),
    ),
    "service": Row(events=_AGENT_EVENTS, observations="any", jetstream=("events_read",)),
    "mcp": Row(events=_AGENT_EVENTS, observations="any", jetstream=("events_read",)),
}
"""Each service's row (the operator's is in :func:`service_identity`; an agent's :func:`agent_identity`)."""


def event_subject(prefix: str, event: str) -> str:
    """The subjects of events named ``event`` (``memory.created``) in every workspace and mind."""
    return f"{prefix}.evt.*.*.{event.replace('.', '_')}"


def _vector_cache(topology: Topology) -> list[str]:
    # The vector cache retrieve and embed share (noema.adapters.vector_cache): put, and get by subject.
    return [topology.vector_subjects, f"$JS.API.DIRECT.GET.{topology.vector_stream}.>"]


def _recreate_own_consumer(name: str, topology: Topology) -> list[str]:
    # attend re-creates its consumer just after the last decided candidate on start; the projector
    # at its own tracked position.
    kind = _CONSUMERS[name][0]
    stream = topology.observation_stream if kind == "observations" else topology.event_stream
    return [f"$JS.API.CONSUMER.DELETE.{stream}.{topology.durable(name)}"]


def _erase_observations(topology: Topology) -> list[str]:
    # Applying a recorded erasure (content.erased), the projector deletes the erased observations it
    # names, each checked to be one of them (noema.adapters.erased_observations).
    stream = topology.observation_stream
    return [f"$JS.API.STREAM.MSG.GET.{stream}", f"$JS.API.STREAM.MSG.DELETE.{stream}"]


_JETSTREAM: dict[str, Callable[[str, Topology], list[str]]] = {
    "events_read": lambda _, t: _events_read(t),
    "consumers_info": lambda _, t: _all_consumers_info(t),
    "dead_letters_admin": lambda _, t: _dead_letters_admin(t),
    "ephemeral_reader": lambda _, t: _ephemeral_reader(t),
    "purge_vector_cache": lambda _, t: [f"$JS.API.STREAM.PURGE.{t.vector_stream}"],
    "vector_cache": lambda _, t: _vector_cache(t),
    "recreate_own_consumer": _recreate_own_consumer,
    "erase_observations": lambda _, t: _erase_observations(t),
}
"""The JetStream API groups a row may name, each expanded to exact subjects."""


def _service_publish(name: str, topology: Topology) -> list[str]:
    p = topology.prefix
    row = ROWS[name]
    streams = {"observations": topology.observation_stream, "events": topology.event_stream}
    # Every process may read the streams' and consumers' state and the heartbeats: `noemactl status`
    # (the Kubernetes probe) runs with the credentials of the pod it probes.
    allowed = [*_stream_info(topology), *_status_reader(topology)]
    allowed += [event_subject(p, event) for event in row.events]
    allowed.append(f"{p}.dlq.{name}")
    allowed.append(f"$KV.{topology.health_bucket}.{name}.>")  # its own heartbeat (noema.runtime.health)
    for kind in _CONSUMERS.get(name, ()):
        for durable in dict.fromkeys([topology.durable(name), *_durables(name, topology)]):
            allowed += _consumer(streams[kind], durable)
    if name in PARTITIONED and topology.partitioned:
        stream = streams[_CONSUMERS[name][0]]
        # One consumer per partition, re-created at its ack floor by its owner; the consumers of an
        # earlier partition count are read (where to start, and the first message a partition of it
        # never consumed) and retired once all of this one's exist. It deletes its own consumers
        # only: those of this count and of every smaller one (a count grows; after it shrinks, the
        # operator deletes the larger count's, deploy/README.md).
        allowed += [
            f"$JS.API.CONSUMER.INFO.{stream}.*",
            f"$JS.API.CONSUMER.NAMES.{stream}",
            f"$JS.API.CONSUMER.LIST.{stream}",
            f"$JS.API.STREAM.MSG.GET.{stream}",
            *(f"$JS.API.CONSUMER.DELETE.{stream}.{durable}" for durable in _own_durables(name, topology)),
        ]
    observations = {"any": [f"{p}.obs.*.*"], "all": [f"{p}.obs.>"], "recall": [f"{p}.obs.*.*.recall"], "": []}
    allowed += observations[row.observations]
    for group in row.jetstream:
        allowed += _JETSTREAM[group](name, topology)
    return list(dict.fromkeys(allowed))  # once each, in order


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` one token, ``>`` one or more at the end."""
    p, s = pattern.split("."), subject.split(".")
    if p[-1] == ">":
        return len(s) >= len(p) and all(a in ("*", b) for a, b in zip(p[:-1], s, strict=False))
    return len(p) == len(s) and all(a in ("*", b) for a, b in zip(p, s, strict=True))


def shipped_allows(user: str | None, subject: str, topology: Topology) -> bool:
    """Whether ``user``, when it is a shipped service's identity, may publish on ``subject`` (True
    for any other user: the operator's, an external server's own): a process asks before a step its
    identity may lack, instead of waiting for a refused request to time out."""
    services = {service_user(name): name for name in SERVICES}
    if user not in services:
        return True
    return any(subject_matches(pattern, subject) for pattern in _service_publish(services[user], topology))


def service_identity(name: str, password: str, topology: Topology) -> Identity:
    """The identity of one Noema process (``name`` one of :data:`SERVICES`) or of the operator."""
    user = service_user(name)
    inbox = f"{inbox_prefix(user)}.>"
    if name == OPERATOR:
        p = topology.prefix
        streams = (
            topology.observation_stream,
            topology.event_stream,
            topology.dead_letter_stream,
            topology.health_stream,
            topology.vector_stream,
        )
        move = f"{topology.dead_letter_stream}{MOVE_SUFFIX}"
        publish = [
            f"{p}.>",
            "$JS.API.INFO",
            "$JS.API.STREAM.NAMES",
            "$JS.API.STREAM.LIST",
            *_stream_info(topology),
            *(f"$JS.API.STREAM.{verb}.{s}" for verb in ("CREATE", "UPDATE") for s in streams),
            *(f"$JS.API.STREAM.MSG.GET.{s}" for s in streams),
            *(f"$JS.API.DIRECT.GET.{s}" for s in streams),
            *(f"$JS.API.DIRECT.GET.{s}.>" for s in streams),
            f"$JS.API.STREAM.MSG.DELETE.{topology.dead_letter_stream}",
            *_erasure(topology),  # noemactl erase
            # noemactl dlq upgrade: the dead-letter stream is recreated through a temporary copy.
            f"$JS.API.STREAM.DELETE.{topology.dead_letter_stream}",
            *(f"$JS.API.STREAM.{verb}.{move}" for verb in ("CREATE", "UPDATE", "INFO", "DELETE")),
            f"$KV.{topology.health_bucket}.{OPERATOR}.>",
            *(
                f"$JS.API.CONSUMER.{verb}.{s}.>"
                for verb in ("CREATE", "INFO", "DELETE", "MSG.NEXT")
                for s in streams
            ),
            *(f"$JS.API.CONSUMER.{verb}.{s}" for verb in ("CREATE", "LIST", "NAMES") for s in streams),
            *(f"$JS.ACK.{s}.>" for s in streams),
            "$SRV.>",
        ]
        # The operator reads everything (`nats sub`, the README's examples with the default inbox).
        return Identity(user, password, Permissions(tuple(publish), (">",), allow_responses=True))
    if name not in SERVICES:
        raise ValueError(f"unknown service {name!r}; one of {', '.join(SERVICES)} or {OPERATOR}")
    subscribe = [inbox]
    if name == "service":
        # The NATS micro service: its endpoints and the $SRV discovery subjects.
        subscribe += [f"{topology.prefix}.agent.>", "$SRV.>"]
    return Identity(
        user,
        password,
        Permissions(
            tuple(_service_publish(name, topology)), tuple(subscribe), allow_responses=name == "service"
        ),
    )


def agent_identity(workspace: str, agent: str, role: str, password: str, topology: Topology) -> Identity:
    """An agent's identity: its own observations, its own endpoints, its own replies; nothing else
    (no JetStream API: a JetStream publish needs only the subject and the reply inbox)."""
    user = agent_user(workspace, agent)
    p = topology.prefix
    return Identity(
        user,
        password,
        Permissions(
            publish=(f"{p}.obs.{workspace}.{agent}", f"{p}.agent.{workspace}.{role}.{agent}.>"),
            subscribe=(f"{inbox_prefix(user)}.>",),
        ),
    )


def password_variable(name: str) -> str:
    """The environment variable the deployed NATS server reads service ``name``'s password from."""
    return f"{name.upper()}_NATS_PASSWORD"


def deploy_identities(topology: Topology) -> list[Identity]:
    """The services' and the operator's identities as the deploy manifests configure them: each
    password a reference to the server's environment (see :func:`render_authorization`)."""
    return [service_identity(n, f"${password_variable(n)}", topology) for n in (*SERVICES, OPERATOR)]


def _quote(value: str) -> str:
    # nats-server config strings: JSON-style double quotes are accepted and escape everything.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _list(values: Iterable[str]) -> str:
    return "[" + ", ".join(_quote(v) for v in values) + "]"


def render_authorization(identities: Sequence[Identity], *, password_refs: bool = False) -> str:
    """The ``authorization { users [...] }`` block for ``identities`` (no user: no access at all).

    ``password_refs``: write each password unquoted, as a nats-server variable reference (``$NAME``,
    from the server's environment): the deploy manifests keep the secrets out of the config file.
    """
    lines = ["authorization {", "  users = ["]
    for ident in identities:
        password = ident.password if password_refs else _quote(ident.password)
        entry = f"    {{user: {_quote(ident.user)}, password: {password}"
        perms = ident.permissions
        if perms is not None:
            publish = f"allow: {_list(perms.publish)}"
            if perms.deny_publish:
                publish += f", deny: {_list(perms.deny_publish)}"
            entry += (
                f", permissions: {{publish: {{{publish}}}, subscribe: {{allow: {_list(perms.subscribe)}}}"
            )
            if perms.allow_responses:
                entry += ", allow_responses: true"
            entry += "}"
        lines.append(entry + "}")
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"
