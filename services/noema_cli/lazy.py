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

A module's commands may also be registered later (:func:`later`): their names are declared where
the tree is assembled, so that a group lists them without importing the module, which is loaded
(and its commands registered with typer) when one of them is first looked up. ``noemactl memory
search`` imports none of the command modules it does not run; ``noemactl --help`` makes every
command, so it loads them all. The names declared are checked against what the module registers
when it loads (:class:`Later`).
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
from typer.models import CommandInfo, DefaultPlaceholder, TyperInfo

__all__ = ["Later", "LazyGroup", "command", "later", "load_all"]

Maker = Callable[[], Command]


class Later:
    """What a module adds to the tree when ``load`` runs (it imports the module and calls its
    ``register``): the names of the commands and groups it registers, per Typer it registers them on,
    in the order it registers them."""

    def __init__(
        self,
        load: Callable[[], None],
        commands: dict[typer.Typer, tuple[str, ...]],
        groups: dict[typer.Typer, tuple[str, ...]],
    ) -> None:
        self._load = load
        self.commands = commands
        self.groups = groups
        self.loaded = False

    def load(self) -> None:
        """Register the module's commands, once; a name registered but not declared (or declared
        but not registered) is an error here, not a command missing from the tree."""
        if self.loaded:
            return
        before = {typer_app: _registered(typer_app) for typer_app in {*self.commands, *self.groups}}
        self._load()
        self.loaded = True
        for typer_app, (commands, groups) in before.items():
            now_commands, now_groups = _registered(typer_app)
            added = (
                tuple(n for n in now_commands if n not in commands),
                tuple(n for n in now_groups if n not in groups),
            )
            declared = (self.commands.get(typer_app, ()), self.groups.get(typer_app, ()))
            if added != declared:
                name = typer_app.info.name
                raise RuntimeError(f"{self._load} registered {added} on {name}, declared {declared}")


_LATER: list[Later] = []


def later(
    load: Callable[[], None],
    commands: dict[typer.Typer, tuple[str, ...]] | None = None,
    groups: dict[typer.Typer, tuple[str, ...]] | None = None,
) -> None:
    """Declare the commands and groups ``load`` registers: listed now, registered on first lookup."""
    _LATER.append(Later(load, commands or {}, groups or {}))


def load_all() -> None:
    """Register every declared command, each Typer's in the order of the declarations (as if each
    ``register`` had run where it is declared): what ``typer.main.get_command`` needs to see them."""
    for entry in _LATER:
        entry.load()

    def position(name: str | None, names: tuple[str, ...]) -> int:
        return names.index(name) if name in names else -1  # registered directly: first, as they were

    for typer_app in {a for entry in _LATER for a in (*entry.commands, *entry.groups)}:
        later_commands, later_groups = _pending(typer_app)
        commands = tuple(name for name, _ in later_commands)
        groups = tuple(name for name, _ in later_groups)
        typer_app.registered_commands.sort(key=lambda info: position(_command_name(info), commands))
        typer_app.registered_groups.sort(key=lambda info: position(_group_name(info), groups))


def _command_name(info: CommandInfo) -> str:
    assert info.callback is not None, "a command has a callback"
    return info.name or typer_main.get_command_name(info.callback.__name__)


def _group_name(info: TyperInfo) -> str | None:
    """The name of a registered group: ``solve_typer_info_defaults(info).name`` without solving
    the rest (its help among it) when ``add_typer`` was given the name."""
    if isinstance(info.name, DefaultPlaceholder):
        return typer_main.solve_typer_info_defaults(info).name
    return info.name


def _registered(typer_app: typer.Typer) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
    return (
        tuple(_command_name(info) for info in typer_app.registered_commands),
        tuple(_group_name(info) for info in typer_app.registered_groups),
    )


def _pending(typer_app: typer.Typer) -> tuple[list[tuple[str, Later]], list[tuple[str, Later]]]:
    """The commands and the groups declared for ``typer_app``, in the order of the declarations."""
    commands = [(name, entry) for entry in _LATER for name in entry.commands.get(typer_app, ())]
    groups = [(name, entry) for entry in _LATER for name in entry.groups.get(typer_app, ())]
    return commands, groups


def _later_command(entry: Later, typer_app: typer.Typer, name: str, options: dict[str, Any]) -> Command:
    entry.load()
    info = next(info for info in typer_app.registered_commands if _command_name(info) == name)
    return typer_main.get_command_from_info(info, **options)


def _later_group(entry: Later, typer_app: typer.Typer, name: str, app: typer.Typer) -> Command:
    entry.load()
    sub = next(sub for sub in typer_app.registered_groups if _group_name(sub) == name)
    return _group(sub, app)


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
    later_commands, later_groups = _pending(instance)
    groups = {_group_name(sub): sub for sub in instance.registered_groups}
    if not issubclass(cls, LazyGroup) or None in groups:
        # A group class of its own, or a sub-app merged into its parent: as typer builds them.
        for _, entry in (*later_commands, *later_groups):
            entry.load()
        return typer_main.get_group_from_info(info, suggest_commands=app.suggest_commands, **options)
    # Registered directly first, then what is declared to be registered later, in typer's order:
    # the commands, then the groups (a declared module already loaded has both).
    declared = {name for name, _ in later_commands} | {name for name, _ in later_groups}
    makers: dict[str, Maker] = {}
    for registered in instance.registered_commands:
        name = _command_name(registered)
        if name not in declared:
            makers[name] = functools.partial(typer_main.get_command_from_info, registered, **options)
    for name, entry in later_commands:
        makers[name] = functools.partial(_later_command, entry, instance, name, options)
    for group_name, sub in groups.items():
        assert group_name is not None
        if group_name not in declared:
            makers[group_name] = functools.partial(_group, sub, app)
    for name, entry in later_groups:
        makers[name] = functools.partial(_later_group, entry, instance, name, app)
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
