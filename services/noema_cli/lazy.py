"""The command tree, each command converted when it is first looked up.

typer turns every registered command into a click command before parsing anything: it reads each
function's signature and evaluates its annotations, about 0.03 s of CPU for noemactl's tree (55
commands) on every start, although a run invokes one command. :func:`command` builds the same
tree with each group's commands converted on first lookup: running ``noemactl memory search``
converts the root, the ``memory`` group and ``search``; ``noemactl --help`` every command's short
help, but not the commands of the groups under it (issue 32: a keyword search's start-up).

Each group lists the same commands in the same order, and each command is converted by typer's
own code (``typer.main.get_command_from_info``), so the commands, their options, help and
completion are typer's. ``typer.main.get_command(app)`` (what ``typer.testing`` uses) still builds
the whole tree at once; a test compares the two.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import typer
from typer import main as typer_main
from typer._click import Command, Context
from typer.core import TyperGroup
from typer.models import TyperInfo

__all__ = ["LazyGroup", "command"]

Maker = Callable[[], Command]


class _Commands(MutableMapping[str, Command]):
    """A group's commands by name, in registration order, each made on first access."""

    def __init__(self, makers: dict[str, Maker]) -> None:
        self._makers = makers
        self._made: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        made = self._made.get(name)
        if made is None:
            made = self._made[name] = self._makers[name]()
        return made

    def __setitem__(self, name: str, command: Command) -> None:
        self._makers[name] = lambda: command
        self._made[name] = command

    def __delitem__(self, name: str) -> None:
        del self._makers[name]
        self._made.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


class LazyGroup(TyperGroup):
    """A typer group whose commands may be made on first lookup (:class:`_Commands`)."""

    def list_commands(self, ctx: Context) -> list[str]:
        """The names in registration order (typer's own reads every command to list them)."""
        return list(self.commands)


def _group(info: TyperInfo, app: typer.Typer) -> TyperGroup:
    """The group of ``info`` (a registered Typer), its commands and sub-groups made on lookup."""
    instance = info.typer_instance
    assert instance is not None, "a group is made from a Typer instance"
    options: dict[str, Any] = {
        "pretty_exceptions_short": app.pretty_exceptions_short,
        "rich_markup_mode": app.rich_markup_mode,
    }
    solved = typer_main.solve_typer_info_defaults(info)
    cls = solved.cls or TyperGroup
    if cls is TyperGroup:
        cls = LazyGroup
    groups = {typer_main.solve_typer_info_defaults(sub).name: sub for sub in instance.registered_groups}
    if not issubclass(cls, LazyGroup) or None in groups:
        # A group class of its own, or a sub-app merged into its parent: as typer builds them.
        return typer_main.get_group_from_info(info, suggest_commands=app.suggest_commands, **options)
    makers: dict[str, Maker] = {}
    for registered in instance.registered_commands:
        assert registered.callback is not None, "a command has a callback"
        name = registered.name or typer_main.get_command_name(registered.callback.__name__)
        makers[name] = functools.partial(typer_main.get_command_from_info, registered, **options)
    for group_name, sub in groups.items():
        assert group_name is not None
        makers[group_name] = functools.partial(_group, sub, app)
    # The group itself (its callback, options and help) as typer makes it, without its commands.
    shell = copy.copy(instance)
    shell.registered_commands, shell.registered_groups = [], []
    own = copy.copy(info)
    own.typer_instance, own.cls = shell, cls
    group = typer_main.get_group_from_info(own, suggest_commands=app.suggest_commands, **options)
    group.commands = _Commands(makers)
    return group


def command(app: typer.Typer) -> Command:
    """``typer.main.get_command(app)`` for an app with commands, each made on first lookup."""
    group = _group(TyperInfo(app), app)
    if app._add_completion:
        group.params.extend(typer_main.get_install_completion_arguments())
    return group
