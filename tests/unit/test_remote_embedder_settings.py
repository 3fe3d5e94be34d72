"""``NOEMA_EMBEDDER=openai:<base URL>`` and its ``NOEMA_EMBEDDER_*`` settings: read once, refused with
a message that names the variable, and handed on to child processes unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from noema.adapters.embedders import EmbedderConfigError, OpenAIEmbedder, create_embedder
from noema.runtime.readiness import Check, _caused_by_embedder
from noema.runtime.settings import Settings, SettingsError

BASE = {"NOEMA_EMBEDDER": "openai:http://10.0.0.5:8000/v1", "NOEMA_EMBEDDER_MODEL": "e5"}


def test_an_openai_embedder_is_configured_by_its_variables(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("sk-1\n")
    settings = Settings.from_env(
        {
            **BASE,
            "NOEMA_EMBEDDER_API_KEY_FILE": str(key),
            "NOEMA_EMBEDDER_ROLES": "prefix",
            "NOEMA_EMBEDDER_QUERY_PREFIX": "search_query: ",
            "NOEMA_EMBEDDER_BATCH": "16",
            "NOEMA_EMBEDDER_CONCURRENCY": "8",
            "NOEMA_EMBEDDER_QUERY_TIMEOUT": "1.5",
            "NOEMA_EMBEDDER_DIMENSIONS": "768",
        }
    )
    remote = settings.remote_embedder
    assert remote is not None
    assert (remote.base_url, remote.model, remote.roles) == ("http://10.0.0.5:8000/v1", "e5", "prefix")
    assert (remote.batch, remote.concurrency, remote.query_timeout_s, remote.dimensions) == (16, 8, 1.5, 768)
    assert remote.query_prefix == "search_query: "
    assert remote.passage_prefix == "passage: "
    # A child process sees the same settings.
    assert Settings.from_env(settings.to_env()).remote_embedder == remote
    embedder = create_embedder(settings.embedder, remote)
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.name == "e5"
    assert embedder.chunk == 16 * 8
    assert "sk-1" not in repr(embedder)


def test_the_in_process_default_has_no_remote_settings() -> None:
    settings = Settings.from_env({})
    assert settings.remote_embedder is None
    assert not any(k.startswith("NOEMA_EMBEDDER_") for k in settings.to_env())


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"NOEMA_EMBEDDER_MODEL": ""}, "needs NOEMA_EMBEDDER_MODEL"),
        ({"NOEMA_EMBEDDER": "openai:10.0.0.5:8000"}, "give the server's base URL after openai:"),
        ({"NOEMA_EMBEDDER": "openai:http://user:pw@host/v1"}, "no credentials in it"),
        ({"NOEMA_EMBEDDER": "gpt"}, "openai:<base URL>"),
        (
            {"NOEMA_EMBEDDER_ROLES": "both"},
            "NOEMA_EMBEDDER_ROLES='both' must be one of input_type, prefix, none",
        ),
        ({"NOEMA_EMBEDDER_CONCURRENCY": "0"}, "NOEMA_EMBEDDER_CONCURRENCY='0' must be between 1 and 64"),
        (
            {"NOEMA_EMBEDDER_API_KEY_FILE": "/nonexistent/key"},
            "NOEMA_EMBEDDER_API_KEY_FILE='/nonexistent/key'",
        ),
    ],
)
def test_a_malformed_setting_is_refused_by_name(env: dict[str, str], says: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({**BASE, **env})
    assert says in str(refused.value)


def test_openai_without_its_options_is_a_configuration_error() -> None:
    with pytest.raises(EmbedderConfigError, match="needs NOEMA_EMBEDDER_MODEL"):
        create_embedder("openai:http://10.0.0.5:8000/v1")


def test_a_stalled_embed_consumer_names_the_embedder_that_does_not_answer() -> None:
    down = Check(
        "embedder", False, "http://e:8000/v1 does not answer (ConnectionRefusedError): ...", "degraded"
    )
    stalled = Check("embed consumer", False, "noema_embed stalled: 40 waiting", "stalled")
    named = _caused_by_embedder(stalled, down)
    assert (
        named.detail
        == "noema_embed stalled: 40 waiting; cause: the embedder http://e:8000/v1 does not answer"
    )
    assert named.state == "stalled"
    assert _caused_by_embedder(Check("attend consumer", False, "x", "stalled"), down).detail == "x"
