"""Up-front validation: the client and the settings fail fast with a message naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from nats.js.api import KeyValueConfig, StreamConfig
from nats.js.errors import NotFoundError

from noema.adapters.jetstream import ensure_streams
from noema.client import InvalidObservation, build_observation
from noema.runtime.settings import Settings, SettingsError
from noema.topology import Topology


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"workspace": "has space"}, "workspace"),
        ({"workspace": "a.b"}, "workspace"),
        ({"mind": ""}, "mind"),
        ({"channel": "telepathy"}, "channel"),
        ({"salience": 1.5}, "salience"),
        ({"epistemic_kind": "rumour"}, "epistemic_kind"),
    ],
)
def test_an_invalid_observation_is_refused_before_publishing(kwargs: dict[str, Any], message: str) -> None:
    fields = {"content": "the deploy key rotates", "workspace": "acme", "mind": "ops", **kwargs}
    content = fields.pop("content")
    with pytest.raises(InvalidObservation, match=message):
        build_observation(content, **fields)


def test_an_observation_gets_an_id_a_correlation_and_a_utc_time() -> None:
    o = build_observation("hello there world", workspace="acme", mind="ops")
    assert o.id
    assert o.correlation_id == o.id
    assert o.occurred_at.tzinfo is not None


def test_settings_read_prefixed_variables() -> None:
    s = Settings.from_env(
        {
            "NOEMA_DATA_DIR": "/srv/n",
            "NOEMA_NATS_URL": "nats://x:4222",
            "NOEMA_DATABASE_URL": "postgresql://x/y",
            "NOEMA_ATTEND_THRESHOLD": "0.7",
            "NOEMA_WM_CAPACITY": "5",
            "NOEMA_STREAM_REPLICAS": "3",
            "NOEMA_METRICS_PORT": "9464",
            "NOEMA_METRICS_HOST": "0.0.0.0",
        }
    )
    assert str(s.data_dir) == "/srv/n"
    assert s.external
    assert s.attend_threshold == 0.7
    assert (s.wm_capacity, Settings.from_env({}).wm_capacity) == (5, 9)
    assert (s.stream_replicas, Settings.from_env({}).stream_replicas) == (3, 1)
    assert (s.metrics_port, s.metrics_host) == (9464, "0.0.0.0")
    assert (
        Settings.from_env({}).metrics_port,
        Settings.from_env({"NOEMA_METRICS_PORT": "0"}).metrics_port,
    ) == (
        None,
        0,
    )
    assert Settings.from_env(s.to_env()) == s


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NOEMA_ATTEND_THRESHOLD": "high"}, "NOEMA_ATTEND_THRESHOLD"),
        ({"NOEMA_ATTEND_THRESHOLD": "2"}, "between"),
        ({"NOEMA_BATCH_SIZE": "0"}, "NOEMA_BATCH_SIZE"),
        ({"NOEMA_DB_SCHEMA": "Robert'); DROP"}, "NOEMA_DB_SCHEMA"),
        ({"NOEMA_LOG_FORMAT": "xml"}, "NOEMA_LOG_FORMAT"),
        ({"NOEMA_WM_CAPACITY": "0"}, r"NOEMA_WM_CAPACITY='0' must be between 1 and 100"),
        ({"NOEMA_WM_CAPACITY": "nine"}, r"NOEMA_WM_CAPACITY='nine' is not an integer"),
        ({"NOEMA_STREAM_REPLICAS": "0"}, r"NOEMA_STREAM_REPLICAS='0' must be between 1 and 5"),
        ({"NOEMA_METRICS_PORT": "on"}, r"NOEMA_METRICS_PORT='on' is not an integer"),
        ({"NOEMA_METRICS_PORT": "70000"}, r"NOEMA_METRICS_PORT='70000' must be between 0 and 65535"),
    ],
)
def test_malformed_settings_fail_fast_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


class _RecordingJetStream:
    """Enough of a JetStreamContext for ensure_streams: no stream exists yet."""

    def __init__(self) -> None:
        self.created: list[StreamConfig] = []

    async def stream_info(self, name: str) -> None:
        raise NotFoundError

    async def add_stream(self, config: StreamConfig) -> None:
        self.created.append(config)

    async def create_key_value(self, config: KeyValueConfig) -> None:
        self.created.append(StreamConfig(name=f"KV_{config.bucket}", num_replicas=config.replicas))


async def test_streams_are_kept_on_as_many_servers_as_configured() -> None:
    js = _RecordingJetStream()
    await ensure_streams(js, Topology("noema"), 120, replicas=3)  # type: ignore[arg-type]
    assert {c.name: c.num_replicas for c in js.created} == {
        "NOEMA_OBSERVATIONS": 3,
        "NOEMA_EVENTS": 3,
        "NOEMA_DEADLETTER": 3,
        "KV_NOEMA_HEALTH": 3,  # the heartbeats' bucket
        "NOEMA_VECTORS": 3,  # the vector cache
    }


def test_subjects_carry_workspace_and_mind() -> None:
    t = Topology("noema")
    assert t.observation_subject("acme", "ops") == "noema.obs.acme.ops"
    assert t.event_stream == "NOEMA_EVENTS"
