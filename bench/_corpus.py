"""Texts for the load benchmark: what agents observe, and what operators ask about it.

``notes``: synthetic short agent notes (10–20 words, varied vocabulary, deterministic).
``locomo``: the turns of LoCoMo conversations (speaker as participant, the session's date as
happened_at, as bench.recall ingests them), and their questions as searches.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .recall import load, turns

__all__ = ["Corpus", "Passage", "corpus"]


@dataclass(frozen=True)
class Passage:
    """One observation's text and the episodic frame the embed worker puts around it."""

    text: str
    participants: tuple[str, ...] = ()
    happened_at: datetime | None = None


@dataclass(frozen=True)
class Corpus:
    """Observations to publish (cycled) and queries to search with (cycled)."""

    name: str
    passages: list[Passage]
    queries: list[str]


_SERVICES = ["billing", "checkout", "auth", "search", "payments", "inventory", "notifications", "ledger"]
_SERVICES += ["gateway", "reporting", "onboarding", "scheduler", "exports", "webhooks", "profiles"]
_THINGS = ["deploy", "migration", "nightly backup", "canary release", "load test", "schema change"]
_THINGS += ["certificate renewal", "cache warmup", "index rebuild", "rollback", "config push"]
_OUTCOMES = [
    "failed at step {n} because the {dep} connection timed out",
    "finished in {n} minutes after retrying the {dep} health check",
    "was paused while {person} reviewed the {dep} dashboard",
    "succeeded but latency on {dep} rose by {n} percent for an hour",
    "was rolled back when {dep} returned errors for {n} requests",
    "is blocked until {person} rotates the {dep} credentials",
    "needs a follow-up ticket since {dep} logged {n} warnings about disk usage",
]
_DEPS = ["postgres", "redis", "kafka", "vault", "s3", "dns", "ldap", "smtp", "elasticsearch", "grafana"]
_PEOPLE = ["Alice", "Bob", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun"]
_CONTEXT = ["", " on the staging cluster", " in the eu-west region", " during the Friday window"]
_CONTEXT += [" before the release freeze", " after the on-call handover"]
_QUESTIONS = [
    "why did the {svc} {thing} fail",
    "what happened with {dep} during the {thing}",
    "who is reviewing the {svc} rollout",
    "which services had errors from {dep}",
    "how long did the {svc} {thing} take",
    "is anything blocked on {person}",
]


def _notes(count: int, seed: int = 17) -> Corpus:
    rng = random.Random(seed)
    passages = []
    for _ in range(count):
        outcome = rng.choice(_OUTCOMES).format(
            n=rng.randint(2, 90), dep=rng.choice(_DEPS), person=rng.choice(_PEOPLE)
        )
        text = f"The {rng.choice(_THINGS)} of {rng.choice(_SERVICES)} {outcome}{rng.choice(_CONTEXT)}."
        passages.append(Passage(text))
    queries = [
        rng.choice(_QUESTIONS).format(
            svc=rng.choice(_SERVICES),
            thing=rng.choice(_THINGS),
            dep=rng.choice(_DEPS),
            person=rng.choice(_PEOPLE),
        )
        for _ in range(200)
    ]
    return Corpus("notes", passages, queries)


def _locomo(folder: Path) -> Corpus:
    passages: list[Passage] = []
    queries: list[str] = []
    for _, conv in load([str(folder)]):
        for _, speaker, text, when, _ in turns(conv):
            if text.strip():
                passages.append(Passage(text, (speaker,), when))
        queries.extend(str(qa["question"]) for qa in conv.get("qa", []) if qa.get("question"))
    if not passages or not queries:
        raise SystemExit(f"no LoCoMo conversations with turns and questions in {folder}")
    return Corpus("locomo", passages, queries)


def corpus(name: str, locomo_folder: Path, count: int = 5_000) -> Corpus:
    """The named corpus (``notes``: ``count`` generated notes; ``locomo``: every turn in the folder)."""
    return _locomo(locomo_folder) if name == "locomo" else _notes(count)
