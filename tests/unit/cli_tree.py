"""The command tree ``noemactl`` shows, walked: each command's path, help page and options. Imports
nothing of noemactl, so that a fresh interpreter can walk the tree without loading a command module
first (tests/unit/test_cli_lazy.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from typer._click import Context

__all__ = ["tree"]


def tree(command: Any, path: tuple[str, ...] = ("noemactl",), parent: Any = None) -> Iterator[Any]:
    """Every command of the tree: its path, help page, options and whether no arguments show help."""
    ctx = Context(command, info_name=path[-1], parent=parent)
    options = [(p.name, (*p.opts, *p.secondary_opts), p.required, p.multiple) for p in command.params]
    yield path, command.get_help(ctx), options, bool(getattr(command, "no_args_is_help", False))
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            yield from tree(command.get_command(ctx, name), (*path, name), ctx)
