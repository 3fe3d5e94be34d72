"""Settings of the API process: the shared settings plus where its operator tokens are kept."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from noema.adapters.asgi import DEFAULT_MAX_BODY
from noema.runtime.settings import Settings, SettingsError

from .auth import ensure_tokens_file

__all__ = ["ApiSettings", "max_body", "prepare_tokens", "tokens_path"]

TOKENS_FILE = "api-tokens.json"


def max_body(env: Mapping[str, str]) -> int:
    """``NOEMA_API_MAX_BODY``: the largest request body in bytes (default 1 MiB; a suffix ``K``
    or ``M`` counts KiB or MiB)."""
    raw = env.get("NOEMA_API_MAX_BODY", "").strip()
    if not raw:
        return DEFAULT_MAX_BODY
    scale = {"k": 1024, "m": 1024 * 1024}.get(raw[-1].lower(), 1)
    digits = raw[:-1] if scale > 1 else raw
    if not digits.isdigit() or not 1 <= int(digits) * scale <= 2**31:
        raise SettingsError(
            f"NOEMA_API_MAX_BODY={raw!r} must be a number of bytes from 1 to 2 GiB (e.g. 1048576, 512K or 4M)"
        )
    return int(digits) * scale


def tokens_path(settings: Settings, env: Mapping[str, str] | None = None) -> Path:
    """``NOEMA_API_TOKENS`` (a tokens file) when set, else ``<data-dir>/api-tokens.json``."""
    env = os.environ if env is None else env
    given = env.get("NOEMA_API_TOKENS")
    return Path(given).expanduser() if given else settings.data_dir.expanduser() / TOKENS_FILE


@dataclass(frozen=True)
class ApiSettings:
    """Everything the API process reads from its environment, once, at start."""

    base: Settings
    tokens_file: Path
    generate_tokens: bool
    """Create the tokens file with one operator token when it is missing (not for a given file)."""
    max_body: int = DEFAULT_MAX_BODY
    """The largest request body, in bytes (``NOEMA_API_MAX_BODY``); larger ones are refused with 413."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApiSettings:
        """Read ``NOEMA_*`` variables (see :class:`noema.runtime.settings.Settings`), ``NOEMA_API_TOKENS`` and
        ``NOEMA_API_MAX_BODY``."""
        env = os.environ if env is None else env
        base = Settings.from_env(env)
        return cls(
            base,
            tokens_path(base, env),
            generate_tokens=not env.get("NOEMA_API_TOKENS"),
            max_body=max_body(env),
        )


def prepare_tokens(settings: Settings, env: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """The tokens file of ``settings``, created with one operator token unless configured; returns
    (path, created now)."""
    env = os.environ if env is None else env
    api = ApiSettings(settings, tokens_path(settings, env), generate_tokens=not env.get("NOEMA_API_TOKENS"))
    return api.tokens_file, api.generate_tokens and ensure_tokens_file(api.tokens_file)
