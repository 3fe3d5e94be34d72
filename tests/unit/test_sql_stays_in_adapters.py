"""SQL lives in the adapters: no string literal outside ``libs/noema/adapters/`` in the shipped code
(libs, services, sdk, schemas) reads like an SQL statement. The application reaches the read model
through the ports of :mod:`noema.ports` only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .source_trees import parsed

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("libs", "services", "sdk", "schemas")
ADAPTERS = ROOT / "libs" / "noema" / "adapters"
SQL = re.compile(
    r"\bSELECT\s|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b|\bWITH\s+\w+\s+AS\s*\("
    r"|\b(CREATE|DROP|ALTER)\s+(SCHEMA|TABLE|INDEX|ROLE)\b|\bTRUNCATE\s"
)


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant, f-strings' literal parts included, with its line."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def sql_outside_adapters() -> list[str]:
    """``path:line: text`` of each SQL-looking literal outside the adapters."""
    found = []
    for top in SHIPPED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.is_relative_to(ADAPTERS):
                continue
            for line, text in _literals(parsed(path)):
                if SQL.search(text):
                    found.append(f"{path.relative_to(ROOT)}:{line}: {text.strip()[:80]}")
    return found


def test_the_pattern_recognises_the_statements_it_guards_against() -> None:
    for statement in (
        "SELECT id FROM memories",
        "INSERT INTO grants (role) VALUES ($1)",
        "UPDATE memories SET status = $2",
        "DELETE FROM policies",
        "WITH recent AS (SELECT 1)",
        "DROP SCHEMA replay_1 CASCADE",
        "ALTER ROLE noema PASSWORD 'x'",
    ):
        assert SQL.search(statement), statement
    assert not SQL.search("select the rarest word; update the notes"), "prose is not SQL"


def test_no_sql_string_outside_the_adapters() -> None:
    assert sql_outside_adapters() == [], "move these statements into an adapter behind a port"
