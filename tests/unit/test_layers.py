"""Imports point down: every module of the shipped code (libs, services, schemas, sdk) imports only
modules of a lower layer or of its own part of a layer (docs/architecture.md#layers), and the
drivers (nats-py, asyncpg) only where the servers are driven: the adapters, the runtime and the
composition root. Read from the source (``ast``), every import counted: at the top, inside a
function, under ``TYPE_CHECKING``.

``KNOWN`` lists the imports against the direction that are still there (none now), each to be removed
by moving code, never added to: the test fails on an import against the direction that is not listed,
and on a listed one that is gone (take it off the list)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .source_trees import parsed

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("libs", "schemas", "services", "sdk")

LAYERS: tuple[dict[str, tuple[str, ...]], ...] = (
    # 0: what Noema shares with everyone: the published SDK and the event catalog (apart)
    {"sdk": ("noema_sdk",), "events": ("noema_events",)},
    # 1: the shared vocabulary: errors, ids, times, inputs, stream names; running off the event loop
    {
        "vocabulary": (
            "noema.errors",
            "noema.ids",
            "noema.instants",
            "noema.stream_points",
            "noema.inputs",
            "noema.observations",
            "noema.topology",
            "noema.threads",
            "noema.records",
            "noema",  # the package itself (its version), not what is under it
        )
    },
    # 2: pure rules
    {"domain": ("noema.domain",)},
    # 3: what the application needs from the outside world
    {"ports": ("noema.ports",)},
    # 4: the application behind the ports, and apart from it the adapters that implement them
    {"application": ("noema.application",), "adapters": ("noema.adapters", "noema.client")},
    # 5: plumbing every process shares (settings, the worker loop, health, the embedded servers)
    {"runtime": ("noema.runtime",)},
    # 6: the composition root: builds the adapters and hands them to the application
    {"composition": ("noema.composition",)},
    # 7: the surfaces and workers (and the tools among them that generate documents from all of them)
    {
        "surfaces": (
            "noema_api",
            "noema_attend",
            "noema_cli",
            "noema_conflicts",
            "noema_decay",
            "noema_embed",
            "noema_mcp",
            "noema_projector",
            "noema_retrieve",
            "noema_service",
        )
    },
)
"""The layers from the bottom up, each a few parts: a module may import its own part and any part of
a lower layer, nothing else (two parts of one layer stay apart)."""

DRIVERS = ("nats", "asyncpg")
DRIVEN_FROM = ("adapters", "runtime", "composition", "sdk")
"""The parts that may import a driver (the SDK is a client of the NATS agent service of its own)."""

MESSAGE_TYPES = ("Msg",)
"""The transport's message type (nats-py's, re-exported by :mod:`noema.runtime.consumer` for the
consumers): held only where the drivers are. A worker module wires a decision to its consumer; the
hooks it gives the consumer see sequences, subjects and bytes, never a message (docs/architecture.md,
"Decisions without transport")."""

KNOWN: set[str] = set()
"""Imports against the direction that are still there (``path: imported module``): the ones left by
the layer moves of issue 29 are all gone; never add one (move the code instead)."""


@dataclass(frozen=True)
class Part:
    layer: int
    name: str


def _parts() -> list[tuple[str, Part]]:
    found = [
        (prefix, Part(i, name))
        for i, parts in enumerate(LAYERS)
        for name, prefixes in parts.items()
        for prefix in prefixes
    ]
    return sorted(found, key=lambda p: -len(p[0]))  # the longest prefix decides


PARTS = _parts()


def part_of(module: str) -> Part | None:
    """The part ``module`` belongs to (None: not Noema's: the standard library, a dependency)."""
    for prefix, part in PARTS:
        if module == prefix or (module.startswith(prefix + ".") and prefix != "noema"):
            return part
    return None


def _module(path: Path, root: Path = ROOT) -> tuple[str, str]:
    """(dotted name, its package) of a shipped source file."""
    rel = path.relative_to(root).with_suffix("").parts[1:]
    if rel[-1] == "__init__":
        name = ".".join(rel[:-1])
        return name, name
    name = ".".join(rel)
    return name, name.rpartition(".")[0]


def _imported(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """(line, module) of every import in ``tree``; ``from a import b`` counts as ``a.b`` when ``b`` is a
    module of this tree (so a package's face does not hide what is taken from it)."""
    out = []
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out += [
                (node.lineno, f"{module}.{a.name}" if _is_module(f"{module}.{a.name}") else module)
                for a in node.names
            ]
    return out


def _statements(node: ast.AST) -> Iterator[ast.AST]:
    """Every statement under ``node``, however deeply nested (in functions, classes, ``if``, ``try``,
    ``with``, ``match``): where an import can be. Expressions hold none, so they are not walked."""
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, ()):
            yield child
            yield from _statements(child)


@functools.cache
def _imports_in(path: Path, package: str) -> tuple[tuple[int, str], ...]:
    """:func:`_imported` of a file, read once per test process (two tests scan the whole tree)."""
    return tuple(_imported(parsed(path), package))


@functools.cache
def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")
    for top in SHIPPED:
        base = ROOT / top / Path(*parts)
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True
    return False


def is_against(module: str, target: str) -> bool:
    """Whether ``module`` importing ``target`` goes against the direction."""
    here, there = part_of(module), part_of(target)
    if here is None:
        return False
    if there is None:
        return target.split(".")[0] in DRIVERS and here.name not in DRIVEN_FROM
    return there != here and there.layer >= here.layer


def against_the_direction(root: Path = ROOT) -> dict[str, list[int]]:
    """``path: imported module`` → the lines of every import against the direction."""
    found: dict[str, list[int]] = {}
    for top in SHIPPED:
        for path in sorted((root / top).rglob("*.py")):
            module, package = _module(path, root)
            for line, target in _imports_in(path, package):
                if is_against(module, target):
                    found.setdefault(f"{path.relative_to(root)}: {target}", []).append(line)
    return found


def messages_held(root: Path = ROOT) -> dict[str, list[int]]:
    """``path: name`` → the lines where a module outside the driven parts imports the transport's
    message type (:data:`MESSAGE_TYPES`), from wherever it is taken."""
    found: dict[str, list[int]] = {}
    for top in SHIPPED:
        for path in sorted((root / top).rglob("*.py")):
            part = part_of(_module(path, root)[0])
            if part is None or part.name in DRIVEN_FROM:
                continue
            rel = path.relative_to(root)
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom):
                    for alias in node.names:
                        if alias.name in MESSAGE_TYPES:
                            found.setdefault(f"{rel}: {alias.name}", []).append(node.lineno)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module → the modules of the shipped tree it imports (every import, as above)."""
    paths = {}
    for top in SHIPPED:
        for path in sorted((root / top).rglob("*.py")):
            paths[_module(path, root)[0]] = path
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        graph[module] = set()
        for _, target in _imports_in(path, package):
            parts = target.split(".")
            while parts and ".".join(parts) not in paths:
                parts.pop()  # a name taken from a module: the module
            if parts and ".".join(parts) != module:
                graph[module].add(".".join(parts))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules that import each other in a loop, each loop sorted (Tarjan's components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            loop = []
            while True:
                w = stack.pop()
                loop.append(w)
                if w == v:
                    break
            if len(loop) > 1:
                found.append(sorted(loop))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_of_the_tree_has_a_layer() -> None:
    homeless = []
    for top in SHIPPED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if part_of(_module(path)[0]) is None:
                homeless.append(str(path.relative_to(ROOT)))
    assert homeless == [], "give these modules a part in LAYERS"


def test_the_parts_keep_their_order() -> None:
    assert part_of("noema.adapters.postgres.voices") == Part(4, "adapters")
    assert part_of("noema.application.facade") == Part(4, "application")
    assert part_of("noema.errors") == Part(1, "vocabulary")
    assert part_of("noema_service.documents") == Part(7, "surfaces")
    assert part_of("noema_events.catalog") == Part(0, "events")
    assert part_of("asyncpg") is None


def test_an_import_against_the_direction_is_found() -> None:
    assert is_against("noema.application.search", "asyncpg")  # a driver outside the adapters
    assert is_against("noema.application.facade", "noema.adapters.jetstream")  # a part beside it
    assert is_against("noema.adapters.jetstream", "noema.application.sealing")
    assert is_against("noema.domain.ranking", "noema.ports")  # up
    assert is_against("noema.errors", "noema.adapters.errors")
    assert is_against("noema_events.catalog", "noema_service.operations")
    assert not is_against("noema.application.search", "noema.errors")
    assert not is_against("noema.application.search", "noema.application.vectors")
    assert not is_against("noema.adapters.jetstream", "nats.js")
    assert not is_against("noema.application.search", "numpy")
    assert not is_against("noema_api.app", "noema.adapters.postgres")


def test_the_scan_reads_every_kind_of_import(tmp_path: Path) -> None:
    (tmp_path / "libs" / "noema" / "domain").mkdir(parents=True)
    (tmp_path / "libs" / "noema" / "domain" / "rule.py").write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from noema.errors import Kind\n"
        "if TYPE_CHECKING:\n"
        "    from noema.ports import Row\n"
        "def f() -> None:\n"
        "    import nats\n"
        "    from .. import application\n"
    )
    assert against_the_direction(tmp_path) == {
        "libs/noema/domain/rule.py: nats": [7],
        "libs/noema/domain/rule.py: noema.application": [8],
        "libs/noema/domain/rule.py: noema.ports": [5],
    }


def test_imports_point_down() -> None:
    found = against_the_direction()
    new = {k: v for k, v in found.items() if k not in KNOWN}
    gone = sorted(KNOWN - found.keys())
    assert new == {}, "an import against the direction (docs/architecture.md#layers): move the code instead"
    assert gone == [], "no longer there: take these off KNOWN"


def test_a_message_held_by_a_worker_module_is_found(tmp_path: Path) -> None:
    (tmp_path / "services" / "noema_attend").mkdir(parents=True)
    (tmp_path / "services" / "noema_attend" / "worker.py").write_text(
        "from noema.runtime.consumer import EventConsumer, Msg\n"
    )
    (tmp_path / "libs" / "noema" / "runtime").mkdir(parents=True)
    (tmp_path / "libs" / "noema" / "runtime" / "consumer.py").write_text("from nats.aio.msg import Msg\n")
    assert messages_held(tmp_path) == {"services/noema_attend/worker.py: Msg": [1]}


def test_decisions_and_workers_hold_no_message() -> None:
    assert messages_held() == {}, "hand the decision decoded events (docs/architecture.md#layers)"


def test_a_loop_of_imports_is_found() -> None:
    # the circle there was: the OpenAPI document's writer, the route table, the system routes
    graph = {
        "api.openapi": {"api.routes"},
        "api.routes": {"api.system"},
        "api.system": {"api.openapi"},
        "x": {"api.routes"},
    }
    assert cycles(graph) == [["api.openapi", "api.routes", "api.system"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_modules_import_each_other_in_a_loop() -> None:
    assert cycles(import_graph()) == [], "break the loop: move what both need below them"
