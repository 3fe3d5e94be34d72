"""The command tree ``noemactl`` runs (:mod:`noema_cli.lazy`) is typer's tree, each command made when
the command line names it: the same commands in the same order, with the same options and help."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer._click.exceptions import UsageError

from noema_cli import lazy
from noema_cli.main import app, root
from tests.unit.cli_tree import tree


def test_the_lazy_tree_is_typerstree() -> None:
    eager = list(tree(typer.main.get_command(app)))
    made = list(tree(lazy.command(app)))
    assert len(made) == len(eager) > 60
    for ours, typers in zip(made, eager, strict=True):
        assert ours == typers, ours[0]


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the commands made from typer's registrations, in order."""
    names: list[str] = []
    make = typer.main.get_command_from_info

    def counted(info: Any, **options: Any) -> Any:
        command = make(info, **options)
        names.append(str(command.name))
        return command

    monkeypatch.setattr(typer.main, "get_command_from_info", counted)
    return names


def test_a_command_line_makes_only_the_commands_it_names(made: list[str]) -> None:
    root = lazy.command(app)
    with pytest.raises(SystemExit) as shown:  # --help prints the page and exits 0
        root.main(["memory", "search", "--help"], prog_name="noemactl")
    assert shown.value.code == 0
    assert made == ["search"]  # not the other 54, nor memory's other commands


def test_the_root_help_makes_each_command_but_not_those_of_the_groups_under_it(
    made: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    root = lazy.command(app)
    with pytest.raises(SystemExit):
        root.main(["--help"], prog_name="noemactl")
    shown = capsys.readouterr().out
    assert "search" not in made  # memory's
    assert "retry" not in made  # dlq's
    for name in ("up", "observe", "memory", "dlq", "agent"):
        assert f"  {name} " in shown


def test_a_mistyped_command_is_still_told_the_name_it_meant() -> None:
    with pytest.raises(UsageError) as refused:
        lazy.command(app).main(["memroy", "search", "x"], prog_name="noemactl", standalone_mode=False)
    assert "Did you mean 'memory'?" in refused.value.format_message()


ROOT = Path(__file__).resolve().parents[2]
"""The repository: the fresh process imports tests.unit.cli_tree from there."""
TREE = """
import json, sys
from noema_cli import lazy
from noema_cli.main import root
from tests.unit.cli_tree import tree

loaded = sorted(m for m in sys.modules if m.endswith("_cmd"))
print(json.dumps([loaded, list(tree(lazy.command(root)))]))
"""


def test_the_tree_of_a_fresh_process_is_typerstree() -> None:
    """The command modules are loaded when one of their commands is looked up (``lazy.later``): in a
    fresh interpreter none is loaded before the tree is walked, and the tree walked is typer's own,
    each module's commands in the place its ``register`` put them."""
    done = subprocess.run(
        [sys.executable, "-c", TREE], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT
    )
    loaded, made = json.loads(done.stdout)
    assert loaded == []  # nothing but the tree was imported before the walk
    eager = json.loads(json.dumps(list(tree(typer.main.get_command(app)))))
    assert len(made) == len(eager) > 60
    for ours, typers in zip(made, eager, strict=True):
        assert ours == typers, ours[0]


def test_a_module_that_registers_other_names_than_declared_is_refused() -> None:
    """The names listed for a command module are checked when it loads: a command registered but
    not declared would be missing from the tree, a declared one not registered would fail to run."""
    registering = typer.Typer()

    def load() -> None:
        registering.command("one")(lambda: None)
        registering.command("two")(lambda: None)

    entry = lazy.Later(load, commands={registering: ("one",)}, groups={})
    with pytest.raises(RuntimeError, match="registered"):
        entry.load()


def test_app_is_the_wholetree() -> None:
    """``noema_cli.main.app`` (what ``typer.testing`` and ``python -m noema_mcp`` use) has every
    command module registered, each in its place."""
    assert app is root
    names = [lazy._command_name(info) for info in app.registered_commands]
    assert names[:6] == ["up", "observe", "preamble", "decay-tick", "prepare", "status"]
    assert names[-3:] == ["why", "erase", "compact"]
    groups = [info.name for info in app.registered_groups]
    assert groups[:4] == ["memory", "api", "dlq", "agent"]
    assert groups[-1] == "mcp"
