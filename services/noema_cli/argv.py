"""Command-line text that is not UTF-8 is refused before any command runs.

On POSIX, Python hands over argument bytes that are not UTF-8 as lone surrogates ("surrogate
escapes"), which look like text until something encodes them — a JSON encoder, NATS, PostgreSQL,
the terminal — and fails with a traceback, possibly after connecting or publishing. Noema stores
text as UTF-8 everywhere, so every argument, option and ``NOEMA_*`` variable (several options read
one) must be UTF-8: anything else is exit 2 with what to fix, before the command runs.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer.exceptions import Abort

from .common import fail, state
from .lazy import LazyGroup

__all__ = ["Utf8Group", "json_requested", "undecodable"]


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


def json_requested(args: Sequence[str]) -> bool:
    """Whether ``--json`` is among the options (not after ``--``, where it would be a value)."""
    options = args[: args.index("--")] if "--" in args else args
    return "--json" in options


def _usage_message(exc: ClickException) -> str:
    """A parsing error's message, with where to read the usage (click prints the usage itself)."""
    message = exc.format_message()
    if isinstance(exc, UsageError) and exc.ctx is not None:
        message = f"{message} (see `{exc.ctx.command_path} --help`)"
    return message


class Utf8Group(LazyGroup):
    """The root command group: refuses undecodable input before parsing, so no command (not even
    one that would connect to a running instance first) sees it; under ``--json``, an error found
    while parsing the arguments (an unknown option, a value out of range) is the JSON object
    ``{"error", "exit_code"}`` on stderr like every other error, not click's usage text."""

    def main(self, args: Sequence[str] | None = None, *rest: Any, **extra: Any) -> Any:
        """Run the command line; under ``--json``, report a parsing error as JSON (exit 2)."""
        argv = list(sys.argv[1:] if args is None else args)
        if not json_requested(argv):
            return super().main(argv, *rest, **extra)
        try:
            # Not standalone: click raises what it would print; a typer.Exit comes back as its code.
            code = super().main(argv, *rest, **{**extra, "standalone_mode": False})
        except NoArgsIsHelpError as exc:  # a group given no command: its help, as without --json
            exc.show()
            sys.exit(exc.exit_code)
        except ClickException as exc:
            print(json.dumps({"error": _usage_message(exc), "exit_code": exc.exit_code}), file=sys.stderr)
            sys.exit(exc.exit_code)
        except Abort:
            print(json.dumps({"error": "aborted", "exit_code": 1}), file=sys.stderr)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # typer's vendored click Context
        """Check every argument (and the ``NOEMA_*`` environment), then parse as usual."""
        problem = undecodable(args, os.environ)
        if problem:
            state.json = "--json" in args  # errors are JSON under --json, as every other error
            fail(problem, 2)
        result: Any = super().parse_args(ctx, args)
        return list(result)
