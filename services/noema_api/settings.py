"""Settings of the API process: the shared settings plus where its operator tokens are kept."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from noema.settings import Settings

from .auth import ensure_tokens_file

__all__ = ["ApiSettings", "prepare_tokens", "tokens_path"]

TOKENS_FILE = "api-tokens.json"


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

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApiSettings:
        """Read ``NOEMA_*`` variables (see :class:`noema.settings.Settings`) and ``NOEMA_API_TOKENS``."""
        env = os.environ if env is None else env
        base = Settings.from_env(env)
        return cls(base, tokens_path(base, env), generate_tokens=not env.get("NOEMA_API_TOKENS"))


def prepare_tokens(settings: Settings, env: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """The tokens file of ``settings``, created with one operator token unless configured; returns
    (path, created now)."""
    env = os.environ if env is None else env
    api = ApiSettings(settings, tokens_path(settings, env), generate_tokens=not env.get("NOEMA_API_TOKENS"))
    return api.tokens_file, api.generate_tokens and ensure_tokens_file(api.tokens_file)
