"""``NOEMA_API_MAX_BODY``: the operator API's request body limit, read once at start."""

from __future__ import annotations

import pytest

from noema.adapters.asgi import DEFAULT_MAX_BODY
from noema.runtime.settings import SettingsError
from noema_api.settings import ApiSettings


@pytest.mark.parametrize(
    ("given", "limit"),
    [(None, DEFAULT_MAX_BODY), ("", DEFAULT_MAX_BODY), ("2048", 2048), ("512K", 524288), ("4m", 4194304)],
)
def test_the_body_limit_is_read_in_bytes_kib_or_mib(given: str | None, limit: int) -> None:
    env = {"NOEMA_DATA_DIR": "/tmp/noema-unused"} | (
        {"NOEMA_API_MAX_BODY": given} if given is not None else {}
    )
    assert ApiSettings.from_env(env).max_body == limit


@pytest.mark.parametrize("given", ["0", "-1", "1.5M", "lots", "3G", "4096M"])
def test_a_malformed_body_limit_is_refused_with_the_variable_named(given: str) -> None:
    with pytest.raises(SettingsError, match="NOEMA_API_MAX_BODY"):
        ApiSettings.from_env({"NOEMA_DATA_DIR": "/tmp/noema-unused", "NOEMA_API_MAX_BODY": given})
