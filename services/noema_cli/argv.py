"""Command-line text that is not UTF-8 is refused before any command runs.

On POSIX, Python hands over argument bytes that are not UTF-8 as lone surrogates ("surrogate
escapes"), which look like text until something encodes them — a JSON encoder, NATS, PostgreSQL,
the terminal — and fails with a traceback, possibly after connecting or publishing. Noema stores
text as UTF-8 everywhere, so every argument, option and ``NOEMA_*`` variable (several options read
one) must be UTF-8: anything else is exit 2 with what to fix, before the command runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from typer.core import TyperGroup

from .common import fail, state

__all__ = ["Utf8Group", "undecodable"]


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(text: str) -> str:
    """The text with its undecodable bytes written as ``\\xNN``."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def undecodable(args: Sequence[str], env: Mapping[str, str]) -> str | None:
    """What to tell the user about the first argument or ``NOEMA_*`` variable that is not UTF-8,
    or None when all are."""
    for i, arg in enumerate(args):
        if _is_utf8(arg):
            continue
        after = f", the value of {args[i - 1]}" if i and args[i - 1].startswith("-") else ""
        return (
            f"argument {i + 1} ('{_shown(arg)}'{after}) is not valid UTF-8: noemactl takes text, names "
            "and paths in UTF-8 (check the encoding of the terminal or script that passed it)"
        )
    for name in sorted(env):
        if name.startswith("NOEMA_") and not _is_utf8(env[name]):
            return (
                f"environment variable {name} ('{_shown(env[name])}') is not valid UTF-8: set it to "
                "UTF-8 text"
            )
    return None


class Utf8Group(TyperGroup):
    """The root command group: refuses undecodable input before parsing, so no command (not even
    one that would connect to a running instance first) sees it."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # typer's vendored click Context
        """Check every argument (and the ``NOEMA_*`` environment), then parse as usual."""
        problem = undecodable(args, os.environ)
        if problem:
            state.json = "--json" in args  # errors are JSON under --json, as every other error
            fail(problem, 2)
        result: Any = super().parse_args(ctx, args)
        return list(result)
