"""The NATS identities as data: least privilege, rendered into a config nats-server accepts."""

from __future__ import annotations

import fnmatch
import ssl
import stat
import subprocess
from pathlib import Path

import pytest

from noema.adapters.jetstream import auth_options
from noema.runtime.credentials import CredentialStore, redact_url, url_with_credentials
from noema.runtime.embedded import EmbeddedNats, _nats_binary
from noema.runtime.identities import (
    OPERATOR,
    ROWS,
    SERVICES,
    agent_identity,
    agent_user,
    inbox_prefix,
    render_authorization,
    service_identity,
    shipped_allows,
)
from noema.runtime.settings import NatsAuth, Settings, SettingsError
from noema.topology import Topology
from noema_sdk import protocol

TOPOLOGY = Topology("noema")
SHIPPED = [service_identity(name, "pw", TOPOLOGY) for name in (*SERVICES, OPERATOR)]


def _matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` one token, ``>`` one or more at the end."""
    p, s = pattern.split("."), subject.split(".")
    if p[-1] == ">":
        return len(s) >= len(p) and all(a in ("*", b) for a, b in zip(p[:-1], s, strict=False))
    return len(p) == len(s) and all(a in ("*", b) for a, b in zip(p, s, strict=True))


def _may_publish(identity_publish: tuple[str, ...], subject: str) -> bool:
    return any(_matches(pattern, subject) for pattern in identity_publish)


@pytest.mark.parametrize("identity", SHIPPED, ids=lambda i: i.user)
def test_no_shipped_identity_may_delete_or_purge_a_stream(identity) -> None:  # type: ignore[no-untyped-def]
    assert identity.permissions is not None, "shipped identities are never unrestricted"
    for stream in ("NOEMA_EVENTS", "NOEMA_OBSERVATIONS", "NOEMA_DEADLETTER", "KV_NOEMA_HEALTH", "ANY"):
        assert not _may_publish(identity.permissions.publish, f"$JS.API.STREAM.PURGE.{stream}")
    # An erasure (the operator's) empties the vector cache, a cache of vectors only.
    may = _may_publish(identity.permissions.publish, "$JS.API.STREAM.PURGE.NOEMA_VECTORS")
    assert may == (identity.user in ("noema-operator", "noema-api")), identity.user
    for stream in ("NOEMA_EVENTS", "NOEMA_OBSERVATIONS", "KV_NOEMA_HEALTH", "ANY"):
        assert not _may_publish(identity.permissions.publish, f"$JS.API.STREAM.DELETE.{stream}")
    # Only `noemactl dlq upgrade` (the operator) recreates the dead-letter stream, through a copy.
    for stream in ("NOEMA_DEADLETTER", "NOEMA_DEADLETTER_MOVE"):
        may = _may_publish(identity.permissions.publish, f"$JS.API.STREAM.DELETE.{stream}")
        assert may == (identity.user == "noema-operator"), identity.user
    # Single messages: never an event; an erased observation by the operator (noemactl erase) and
    # the projector (applying a recorded erasure, each message checked), never the API (docs/privacy.md).
    assert not _may_publish(identity.permissions.publish, "$JS.API.STREAM.MSG.DELETE.NOEMA_EVENTS")
    may = _may_publish(identity.permissions.publish, "$JS.API.STREAM.MSG.DELETE.NOEMA_OBSERVATIONS")
    assert may == (identity.user in ("noema-operator", "noema-projector")), identity.user
    assert not any(fnmatch.fnmatch(p, "$JS.API.>") or p == ">" for p in identity.permissions.publish)


def test_only_the_operator_may_create_or_update_streams() -> None:
    for identity in SHIPPED:
        assert identity.permissions is not None
        may = _may_publish(identity.permissions.publish, "$JS.API.STREAM.UPDATE.NOEMA_EVENTS")
        assert may == (identity.user == "noema-operator"), identity.user


def test_the_operator_and_the_api_may_manage_dead_letters() -> None:
    by_user = {i.user: i for i in SHIPPED}
    for user in ("noema-operator", "noema-api"):
        perms = by_user[user].permissions
        assert perms is not None
        assert _may_publish(perms.publish, "$JS.API.STREAM.MSG.DELETE.NOEMA_DEADLETTER")
        assert _may_publish(perms.publish, "$JS.API.STREAM.MSG.GET.NOEMA_DEADLETTER")
        assert _may_publish(perms.publish, "$JS.API.DIRECT.GET.NOEMA_DEADLETTER")


def test_an_agent_may_publish_its_own_observations_and_requests_only() -> None:
    perms = agent_identity("acme", "alice", "engineer", "pw", Topology("p")).permissions
    assert perms is not None
    assert _may_publish(perms.publish, "p.obs.acme.alice")
    assert _may_publish(perms.publish, "p.agent.acme.engineer.alice.search_memory")
    for subject in (
        "p.obs.acme.bob",
        "p.obs.other.alice",
        "p.obs.acme.alice.recall",
        "p.agent.acme.admin.alice.search_memory",
        "p.agent.other.engineer.alice.search_memory",
        "p.evt.acme.alice.memory_created",
        "$JS.API.STREAM.INFO.P_EVENTS",
        "$JS.API.CONSUMER.CREATE.P_EVENTS",
    ):
        assert not _may_publish(perms.publish, subject), subject
    assert perms.subscribe == ("_INBOX.agent.acme.alice.>",)
    assert not perms.allow_responses


def test_every_subject_follows_the_prefix() -> None:
    for identity in [service_identity(n, "pw", Topology("tenant")) for n in (*SERVICES, OPERATOR)]:
        assert identity.permissions is not None
        for subject in identity.permissions.publish:
            assert not subject.startswith("noema."), (identity.user, subject)


def test_the_sdk_and_the_server_agree_on_agent_users_and_inboxes() -> None:
    assert protocol.agent_user("acme", "alice") == agent_user("acme", "alice")
    assert protocol.inbox_prefix("agent.acme.alice") == inbox_prefix(agent_user("acme", "alice"))


def test_the_rendered_config_is_accepted_by_nats_server(tmp_path: Path) -> None:
    server = EmbeddedNats(tmp_path, prefix="noema")
    store = CredentialStore(tmp_path)
    store.add_agent("acme", "alice", "engineer", "noema")
    (tmp_path / "nats.conf").write_text(server._config())  # the very text start() writes
    checked = subprocess.run(
        [_nats_binary(), "-t", "-c", str(tmp_path / "nats.conf")], capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stderr + checked.stdout
    assert stat.S_IMODE((tmp_path / "nats-auth.json").stat().st_mode) == 0o600
    assert "agent.acme.alice" in render_authorization(store.identities(TOPOLOGY))


def test_credentials_are_reused_across_starts(tmp_path: Path) -> None:
    first = CredentialStore(tmp_path).password("attend")
    assert CredentialStore(tmp_path).password("attend") == first
    assert CredentialStore(tmp_path).password("operator") != first


def test_urls_carry_credentials_and_print_without_them() -> None:
    url = url_with_credentials("nats://127.0.0.1:4222", "noema-operator", "s3cr/t")
    assert url == "nats://noema-operator:s3cr%2Ft@127.0.0.1:4222"
    assert redact_url(url) == "nats://noema-operator:***@127.0.0.1:4222"
    assert redact_url("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"
    assert "s3cr" not in repr(Settings(nats_url=url, nats_auth=NatsAuth(user="u", password="s3cr")))


def test_each_identity_gets_its_own_reply_inbox() -> None:
    assert auth_options("nats://noema-attend:pw@127.0.0.1:1", None)["inbox_prefix"] == "_INBOX.noema-attend"
    options = auth_options("nats://127.0.0.1:1", NatsAuth(user="agent.acme.alice", password="pw"))
    assert options["inbox_prefix"] == "_INBOX.agent.acme.alice"
    assert "inbox_prefix" not in auth_options("nats://127.0.0.1:1", None)


def test_a_tls_url_verifies_the_server(tmp_path: Path) -> None:
    options = auth_options("tls://nats.example:4222", None)
    context = options["tls"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NOEMA_NATS_USER": "noema-attend"}, "NOEMA_NATS_PASSWORD"),
        ({"NOEMA_NATS_PASSWORD": "pw"}, "NOEMA_NATS_USER"),
        ({"NOEMA_NATS_TLS_CA": "/nonexistent/ca.pem"}, "NOEMA_NATS_TLS_CA"),
        ({"NOEMA_NATS_CREDS": "/nonexistent/x.creds"}, "NOEMA_NATS_CREDS"),
    ],
)
def test_malformed_nats_credentials_settings_fail_fast(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


def test_nats_credentials_travel_to_child_processes() -> None:
    settings = Settings.from_env({"NOEMA_NATS_USER": "noema-attend", "NOEMA_NATS_PASSWORD": "pw"})
    again = Settings.from_env(settings.to_env())
    assert again.nats_auth == settings.nats_auth


def test_a_located_process_connects_as_the_identity_it_asks_for(tmp_path: Path) -> None:
    import os

    from noema.runtime.locate import locate, write_state

    store = CredentialStore(tmp_path)
    plain = "nats://127.0.0.1:4222"
    write_state(
        tmp_path,
        {
            "pid": os.getpid(),
            "nats_url": store.service_url(plain, OPERATOR),
            "nats_plain_url": plain,
            "database_url": "postgresql:///x",
        },
    )
    assert stat.S_IMODE((tmp_path / "noema.json").stat().st_mode) == 0o600
    operator = locate(Settings(data_dir=tmp_path))
    assert operator.nats_url == store.service_url(plain, OPERATOR)
    mcp = locate(Settings(data_dir=tmp_path), "mcp")
    assert mcp.nats_url == url_with_credentials(plain, "noema-mcp", store.password("mcp"))


@pytest.mark.parametrize("worker", ["attend", "conflicts"])
def test_a_partitioned_worker_may_delete_its_own_consumers_only(worker: str) -> None:
    four = Topology("noema", 4)
    publish = service_identity(worker, "pw", four).permissions.publish  # type: ignore[union-attr]
    stream = four.observation_stream if worker == "attend" else four.event_stream
    delete = f"$JS.API.CONSUMER.DELETE.{stream}"
    own = [Topology("noema", n).partitioned_durable(worker, p) for n in (1, 2, 3, 4) for p in range(n)]
    assert all(_may_publish(publish, f"{delete}.{durable}") for durable in own), (
        "this count's and smaller ones'"
    )
    others = ["noema_retrieve", "noema_projector", "noema_embed", f"noema_{worker}_8_5", "anything"]
    assert not any(_may_publish(publish, f"{delete}.{durable}") for durable in others)
    assert _may_publish(publish, f"$JS.API.STREAM.MSG.GET.{stream}"), "the first message of a layout"


def test_every_service_has_a_row_and_every_row_names_known_event_types() -> None:
    import typing

    from noema_events import AnyEvent

    known = {t.__struct_config__.tag.rsplit(".", 1)[0] for t in typing.get_args(AnyEvent)}
    assert set(ROWS) == set(SERVICES)
    for name, row in ROWS.items():
        assert set(row.events) <= known, name


def test_a_process_knows_which_steps_its_shipped_identity_lacks() -> None:
    """The API's erasure leaves deleting observations to the projector instead of timing out."""
    delete = "$JS.API.STREAM.MSG.DELETE.NOEMA_OBSERVATIONS"
    assert not shipped_allows("noema-api", delete, TOPOLOGY)
    assert shipped_allows("noema-projector", delete, TOPOLOGY)
    assert shipped_allows("noema-operator", delete, TOPOLOGY)  # not a service's: it tries
    assert shipped_allows(None, delete, TOPOLOGY)  # credentials in a .creds file, a test's user
