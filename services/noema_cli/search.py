"""The parts of ``noemactl memory search`` beside the command itself: its filter options (unknown
values are refused with exit code 2, as click refuses any bad option) and its result table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import typer

from noema.instants import FORMS, InvalidInstant, parse_instant
from noema_events.vocabulary import EPISTEMIC_KINDS, MEMORY_KINDS, MEMORY_STATUSES

from .common import clip, completes, fail, state

if TYPE_CHECKING:  # rich: loaded by what prints a table, not by --help or --json
    from rich.table import Table

__all__ = ["EXPLAINED", "MODES", "PROFILES", "Choices", "Instant", "explanations", "results_table"]

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
    return f"{round(value, 3) + 0.0:.3f}" + (f" #{int(rank)}" if rank else "")  # (no "-0.000")


def results_table(results: Sequence[dict[str, Any]], explain: bool, repo: str | None) -> Table:
    """One row per result (``explain``: :func:`explanations` follow it, a line per result, so that
    the table keeps room for the content at any terminal width)."""
    from rich.table import Table

    table = Table("id", "workspace/mind", "score", "content", "origin event")
    for r in results:
        m = r["memory"]
        table.add_row(
            r["id"][:8],
            f"{m.get('workspace')}/{m.get('mind') or '-'}",
            f"{r['score']:.3f}",
            clip(r["content"], 60),
            f"memory.created #{m.get('origin_seq')} ({str(m.get('origin_event', ''))[:8]})",
        )
    return table


def explanations(results: Sequence[dict[str, Any]], repo: str | None) -> list[str]:
    """A line per result: its score and every component it carries (``name value #rank``), and,
    when a repository was given, whether it was placed first for it. A score below zero says why:
    the diversity penalty (``mmr``) outweighed its relevance."""
    shown = [c for c in EXPLAINED if any(c in r["components"] for r in results)]
    lines = []
    for r in results:
        components = r["components"]
        parts = [f"{c} {cell}" for c in shown if (cell := _cell(components, c))]
        if repo:
            parts.append("repo first" if components.get("repo_first") else "repo -")
        line = f"{r['id'][:8]}  score {r['score']:.3f}: " + " · ".join(parts)
        if r["score"] < 0:
            penalty = components.get("mmr")
            why = f" (the diversity penalty, mmr {penalty:.3f}," if penalty is not None else " (a penalty"
            line += f"  — below zero{why} outweighs its relevance: it repeats a result ranked above)"
        lines.append(line)
    return lines
