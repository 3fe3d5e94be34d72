"""What README promises of every ``noemactl`` command, checked on the command tree (no servers)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.core import TyperGroup
from typer.testing import CliRunner

from noema_cli.main import app

SERVERS = {"up", "api serve", "mcp serve"}
"""Commands that serve until stopped instead of printing a result: no ``--json``."""


def _commands() -> Iterator[tuple[str, Any]]:
    """Every leaf command by its full name (typer vendors its own click: walk typer's classes)."""
    root = typer.main.get_command(app)
    ctx = typer.Context(root)

    def walk(cmd: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        if isinstance(cmd, TyperGroup):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                yield from walk(sub, [*path, name])
        else:
            yield " ".join(path), cmd

    yield from walk(root, [])


def test_every_command_but_the_servers_takes_json_and_every_help_has_an_example() -> None:
    commands = dict(_commands())
    assert set(commands) >= SERVERS
    for name, cmd in commands.items():
        options = {opt for param in cmd.params for opt in getattr(param, "opts", [])}
        assert ("--json" in options) == (name not in SERVERS), name
        assert "Example: " in (cmd.help or ""), name


def test_shell_completion_is_printed_and_completes_commands() -> None:
    runner = CliRunner()
    # Bash's script by name: `--show-completion` ignores a shell name and detects the shell it runs
    # in, which under `make` is /bin/sh, a shell it has no script for (exit 1).
    script = runner.invoke(app, [], prog_name="noemactl", env={"_NOEMACTL_COMPLETE": "source_bash"})
    assert script.exit_code == 0
    assert "complete -o default -F _noemactl_completion noemactl" in script.output
    completing = {
        "_NOEMACTL_COMPLETE": "complete_bash",
        "COMP_WORDS": "noemactl memory ti",
        "COMP_CWORD": "2",
    }
    completed = runner.invoke(app, [], prog_name="noemactl", env=completing)
    assert completed.output.split() == ["timeline"]


def _complete(line: str) -> list[str]:
    """What bash completion offers for the last word of ``line`` (empty after a trailing space)."""
    words = line.split()
    current = len(words) if line.endswith(" ") else len(words) - 1
    completing = {"_NOEMACTL_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(current)}
    result = CliRunner().invoke(app, [], prog_name="noemactl", env=completing)
    assert result.exit_code == 0, result.output
    return result.output.split()


def test_completion_offers_the_values_of_choice_options() -> None:
    from noema.application.search import MODES
    from noema_cli.search import PROFILES

    assert _complete("noemactl memory search x --mode ") == list(MODES)
    assert _complete("noemactl memory search x --mode h") == ["hybrid"]
    assert _complete("noemactl memory search x --profile w") == ["weighted"]
    assert PROFILES == ("hybrid", "weighted")
    assert _complete("noemactl memory search x --status ar") == ["archived"]
    assert _complete("noemactl observe x -c o") == ["operator"]
    assert _complete("noemactl fact propose x --veracity i") == ["inferred", "imported"]
    assert _complete("noemactl memory relate a b -r su") == ["supports", "supersedes"]
    assert _complete("noemactl status --expect pro") == ["projector"]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["memory", "search", "x", "--limit", "0"],
            "Invalid value for '--limit': 0 is below the minimum, 1.",
        ),
        (["memory", "search", "x", "--bogus"], "No such option: --bogus"),
        (["memory", "search"], "Missing argument 'query'."),
        (["fact", "list", "-w", "acme", "--json", "extra"], "Got unexpected extra argument(s) (extra)"),
    ],
)
def test_an_argument_error_under_json_is_the_json_error_object_with_exit_2(
    args: list[str], error: str
) -> None:
    as_json = args if "--json" in args else [*args, "--json"]
    result = CliRunner().invoke(app, as_json, prog_name="noemactl")
    assert result.exit_code == 2
    assert result.stdout == ""
    reported = json.loads(result.stderr)
    assert reported["exit_code"] == 2
    assert reported["error"].startswith(error), reported
    assert reported["error"].endswith(" --help`)")  # where to read the usage
    plain = CliRunner().invoke(app, [a for a in args if a != "--json"], prog_name="noemactl")
    assert plain.exit_code == 2
    assert "Usage: noemactl" in plain.stderr  # without --json: click's usage text, as before


def test_version_prints_the_version_and_exits_0() -> None:
    from noema import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"noemactl {__version__}\n")


def test_observe_dash_refuses_stdin_that_is_too_long_or_not_utf8_with_exit_2() -> None:
    runner = CliRunner()
    args = ["observe", "-", "-w", "acme", "-m", "ops"]
    too_long = runner.invoke(app, args, input="é" * 32_001)
    assert too_long.exit_code == 2
    assert "32,001 characters; at most 32,000 are accepted" in too_long.output
    not_text = runner.invoke(app, args, input=b"caf\xe9")
    assert not_text.exit_code == 2
    assert "standard input is not UTF-8 (byte 3)" in not_text.output
    assert not isinstance(not_text.exception, UnicodeDecodeError)


def test_observe_help_states_the_content_limit_and_stdin() -> None:
    result = CliRunner().invoke(app, ["observe", "--help"], terminal_width=200)
    assert "at most 32,000 characters; - reads it from standard input" in result.output


def test_api_token_takes_the_data_folder_given_before_the_subcommand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`noemactl --data-dir X api token` uses X, as `noemactl api token --data-dir X` does (it once
    asked the wrong click for the root's options and wrote a tokens file into the working folder)."""
    for name in [k for k in os.environ if k.startswith("NOEMA_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    before = runner.invoke(app, ["--data-dir", str(tmp_path / "a"), "api", "token", "--json"])
    after = runner.invoke(app, ["api", "token", "--json", "--data-dir", str(tmp_path / "b")])
    assert (before.exit_code, after.exit_code) == (0, 0), before.output + after.output
    assert json.loads(before.stdout)["file"] == str(tmp_path / "a" / "api-tokens.json")
    assert json.loads(after.stdout)["file"] == str(tmp_path / "b" / "api-tokens.json")
    assert not (tmp_path / "var").exists()


def test_replay_keep_says_how_to_open_the_kept_schema_with_psql(tmp_path: Path) -> None:
    from dataclasses import replace

    from noema.runtime.settings import Settings
    from noema_cli.common import state
    from noema_cli.replay_cmd import _how_to_query

    state.settings = Settings(data_dir=tmp_path / "var")
    embedded = _how_to_query("replay_noema_1_2")
    assert embedded.startswith('query it with: psql "$(python3 -c ')
    assert f"{tmp_path}/var/noema.json" in embedded
    assert "['database_urls']['owner']" in embedded
    assert "-c 'SET search_path TO replay_noema_1_2'" in embedded
    state.settings = replace(state.settings, database_url="postgresql://x@db/noema")
    assert _how_to_query("s").startswith('query it with: psql "$NOEMA_DATABASE_URL"')


def test_explain_lines_say_why_a_score_is_below_zero() -> None:
    from noema_cli.search import explanations

    def result(rid: str, score: float, mmr: float) -> dict[str, Any]:
        components = {"lexical": 0.3, "lexical_rank": 1.0, "mmr": mmr}
        return {"id": rid, "score": score, "components": components}

    kept, repeated = explanations([result("a" * 32, 0.4, -0.0001), result("b" * 32, -0.05, -0.45)], None)
    assert kept == "aaaaaaaa  score 0.400: lexical 0.300 #1 · mmr 0.000"
    assert repeated.startswith("bbbbbbbb  score -0.050: lexical 0.300 #1 · mmr -0.450  — below zero")
    assert "diversity penalty, mmr -0.450" in repeated


def test_fact_list_shows_an_operator_entry_as_such_and_a_missing_topic_as_a_dash() -> None:
    from noema_cli.knowledge_cmd import _fact_row

    entered = _fact_row({"agent": "", "veracity": None, "topic": None, "content": "x"})
    assert (entered["agent"], entered["veracity"], entered["topic"]) == ("(operator entry)", "operator", "-")
    proposed = _fact_row({"agent": "alice", "veracity": "stated", "topic": "deploy-day"})
    assert (proposed["agent"], proposed["veracity"], proposed["topic"]) == ("alice", "stated", "deploy-day")


def test_get_preamble_says_a_task_needs_20_characters_for_facts() -> None:
    from noema.application.preamble import MIN_TASK_CHARS
    from noema.application.tools import TOOLS, input_schema

    tool = TOOLS["get_preamble"]
    assert f"{MIN_TASK_CHARS} characters" in tool.description
    assert f"{MIN_TASK_CHARS} characters" in input_schema(tool)["properties"]["task"]["description"]
