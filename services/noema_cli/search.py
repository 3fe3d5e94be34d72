"""The parts of ``noemactl memory search`` beside the command itself: its filter options (unknown
values are refused with exit code 2, as click refuses any bad option) and its result table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import typer
from rich.table import Table

from noema.instants import FORMS, InvalidInstant, parse_instant
from noema_events.vocabulary import EPISTEMIC_KINDS, MEMORY_KINDS, MEMORY_STATUSES

from .common import clip, completes, fail, state

__all__ = ["EXPLAINED", "MODES", "PROFILES", "Choices", "Instant", "results_table"]

MODES = ("keyword", "vector", "semantic", "hybrid")
"""The search modes (``noema.application.search.MODES``, not imported: it loads the recall stack)."""
PROFILES = ("hybrid", "weighted")
"""The profiles of ``--mode hybrid``."""

EXPLAINED = (
    "lexical",
    "semantic",
    "graph",
    "temporal",
    "text",
    "vector",
    "recency",
    "decay",
    "activation",
    "importance",
    "credibility",
    "named",
    "mmr",
)
"""Components shown by ``--explain``, in this order, when the results carry them: the score terms of
every mode and profile (hybrid voices and priors, the weighted profile's terms, RRF shares) and the
decay factor. A voice's rank follows its value as ``#rank``; a memory the vector voice could not
judge (no vector for the current model yet) shows "no vector" there."""

_CHOICES = {"kind": MEMORY_KINDS, "epistemic-kind": EPISTEMIC_KINDS, "status": MEMORY_STATUSES}


def _one_of(allowed: Sequence[str]) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in allowed:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(allowed)}")
        return value

    return parse


def Choices(name: str, text: str) -> Any:
    """A repeatable ``--<name>`` option limited to the vocabulary's values (listed in --help)."""
    allowed = _CHOICES[name]
    return typer.Option(
        None,
        f"--{name}",
        help=f"{text} One of: {', '.join(allowed)}.",
        parser=_one_of(allowed),
        autocompletion=completes(allowed),
    )


def _instant(name: str) -> Callable[[str], datetime]:
    def parse(value: str) -> datetime:
        try:
            return parse_instant(value, f"--{name}")
        except InvalidInstant as exc:
            if state.json:
                fail(str(exc), 2)
            raise typer.BadParameter(str(exc).removeprefix(f"--{name}: ")) from None

    return parse


def Instant(name: str, text: str) -> Any:
    """A ``--<name>`` date/time option, read by :func:`noema.instants.parse_instant`."""
    return typer.Option(
        None, f"--{name}", metavar="DATE|TIME", help=f"{text} Give {FORMS}.", parser=_instant(name)
    )


def _cell(components: dict[str, float], name: str) -> str:
    value = components.get(name)
    if value is None:
        return ""
    if name in ("semantic", "vector") and components.get("semantic_available") == 0.0:
        return "no vector"  # the voice could not judge this memory (its weight went to the text)
    rank = components.get(f"{name}_rank")
    return f"{value + 0.0:.3f}" + (f" #{int(rank)}" if rank else "")  # (+ 0.0: no "-0.000")


def results_table(results: Sequence[dict[str, Any]], explain: bool, repo: str | None) -> Table:
    """One row per result; with ``explain``, a column per component the results carry (and, when a
    repository was given, whether the result was placed first for it)."""
    table = Table("id", "workspace/mind", "score", "content", "origin event")
    shown = [c for c in EXPLAINED if any(c in r["components"] for r in results)] if explain else []
    for c in shown:
        table.add_column(c)
    if explain and repo:
        table.add_column("repo")
    for r in results:
        m = r["memory"]
        row = [
            r["id"][:8],
            f"{m.get('workspace')}/{m.get('mind') or '-'}",
            f"{r['score']:.3f}",
            clip(r["content"], 60),
            f"memory.created #{m.get('origin_seq')} ({str(m.get('origin_event', ''))[:8]})",
        ]
        row += [_cell(r["components"], c) for c in shown]
        if explain and repo:
            row.append("first" if r["components"].get("repo_first") else "")
        table.add_row(*row)
    return table
