"""Workspace knowledge as pure functions (requirements §5, §7): domains, access, fact comparison, conflict
rules, working memory, consolidation and harmonization.

Nothing here does I/O: the application layer (:mod:`noema.application.knowledge`) reads the read model, asks
these functions what to do, and publishes the events they imply.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from noema.records import dataclass
from noema_events.vocabulary import VERACITY_WEIGHT

__all__ = [
    "ACCESS_ORDER",
    "DEFAULT_WM_CAPACITY",
    "EQUIVALENT_SIMILARITY",
    "NEAR_DUPLICATE_SIMILARITY",
    "SESSION_HEADS",
    "WM_FLOOR",
    "WM_HALF_LIFE_MINUTES",
    "DomainRef",
    "FactView",
    "Verdict",
    "WorkingMemory",
    "WorkingMemoryEntry",
    "clusters",
    "compare",
    "content_words",
    "context_relevance",
    "decide_conflict",
    "effective_access",
    "equivalent",
    "session_digest",
    "similarity",
    "slot_relation",
]

ACCESS_ORDER = {"none": 0, "read": 1, "write": 2}
EQUIVALENT_SIMILARITY = 0.8
"""Two statements of one domain/topic whose content words overlap this much say the same thing."""
NEAR_DUPLICATE_SIMILARITY = 0.75
"""consolidate merges facts of one domain at least this similar (across topics)."""
DEFAULT_WM_CAPACITY = 9
WM_HALF_LIFE_MINUTES = 30.0
WM_FLOOR = 0.05
"""A working-memory item whose weight decays below this is dropped."""
SESSION_HEADS = 64
"""A mind continues the episode chains of its 64 most recently continued sessions; a session that
waited longer than that starts a new chain."""

_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._ -]{0,99}$")
_WORD = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")
_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "their",
        "they",
        "them",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "his",
        "her",
        "i",
        "me",
        "my",
        "do",
        "does",
        "did",
        "done",
        "has",
        "have",
        "had",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "may",
        "might",
        "must",
        "so",
        "than",
        "then",
        "also",
        "just",
        "very",
        "every",
        "each",
        "all",
        "any",
        "some",
        "into",
        "onto",
        "over",
        "under",
        "about",
        "after",
        "before",
        "while",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "what",
        "how",
        "not",
        "no",
        "nor",
        "only",
        "own",
        "same",
        "too",
        "s",
        "t",
    }
)
_NEGATIONS = frozenset({"not", "no", "never", "none", "nor", "cannot", "without", "n't"})


# --- domains --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DomainRef:
    """A domain: workspace-wide (``architecture``) or repository-scoped (``repo:<slug>/architecture``).

    The same name in both scopes is two independent stores: ``key`` differs.
    """

    name: str
    repo: str | None = None

    @property
    def key(self) -> str:
        """The stored form (``memories.domain``, grants, policies)."""
        return f"repo:{self.repo}/{self.name}" if self.repo else self.name

    @classmethod
    def parse(cls, domain: str, repo: str | None = None) -> DomainRef:
        """From ``name`` (+ optional repo) or the qualified ``repo:<slug>/name``; raises ValueError."""
        text = domain.strip().lower()
        if text.startswith("repo:"):
            slug, sep, name = text[5:].partition("/")
            if not sep:
                raise ValueError(f"domain {domain!r}: a repository domain is written repo:<slug>/<name>")
            if repo is not None and repo.strip().lower() != slug:
                raise ValueError(f"domain {domain!r} names repository {slug!r}, but repo is {repo!r}")
            repo = slug
        else:
            name = text
        if repo is not None:
            repo = repo.strip().lower()
            if not _SLUG.match(repo):
                raise ValueError(f"repository slug {repo!r}: lower-case letters, digits, '.', '_' and '-'")
        if not _NAME.match(name):
            raise ValueError(
                f"domain name {name!r}: 1-100 lower-case letters, digits, spaces, '.', '_' and '-'"
            )
        return cls(name, repo or None)


def effective_access(grants: Mapping[tuple[str, str], str], role: str, domain: str, strict: bool) -> str:
    """A role's access to a domain key: its own grant, else the domain's every-role grant (``*``),
    else the mode's default (compatible: read; strict: none)."""
    for key in ((role, domain), ("*", domain)):
        if key in grants:
            return grants[key]
    return "none" if strict else "read"


# --- comparing statements ---------------------------------------------------------------------------


def _stem(word: str) -> str:
    """Plural / third-person ``s`` off: keys → key, rotates → rotate, boxes → box, policies → policy."""
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    return word[:-1]


@functools.lru_cache(maxsize=8192)
def content_words(text: str) -> frozenset[str]:
    """Lower-cased, lightly stemmed words without stop words (negations kept: they change meaning)."""
    words = _WORD.findall(text.lower().replace("n't", " not"))
    return frozenset(_stem(w) for w in words if w not in _STOPWORDS or w in _NEGATIONS)


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of two content-word sets (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _value_change(wa: frozenset[str], wb: frozenset[str]) -> bool:
    """Each side has a word or two the other lacks: a different value ("15"/"16", "Friday"/"Monday"),
    however much else they share."""
    only_a, only_b = wa - wb, wb - wa
    return 0 < len(only_a) <= 2 and 0 < len(only_b) <= 2


def equivalent(a: str, b: str) -> bool:
    """Do two statements of the same slot say the same thing (a re-mention rather than a conflict)?

    Most of their content words shared (Jaccard ≥ 0.8), the same negations, and no differing value.
    """
    wa, wb = content_words(a), content_words(b)
    if (wa & _NEGATIONS) != (wb & _NEGATIONS) or _value_change(wa, wb):
        return False
    return similarity(wa, wb) >= EQUIVALENT_SIMILARITY


def compare(a: str, b: str, same_topic: bool = False) -> str:
    """How two statements relate, for harmonize: ``same``, ``contradicts`` or ``unrelated``.

    ``contradicts``: about the same thing but one negates what the other affirms, or each says
    something the other does not in only a word or two (a differing value: "PostgreSQL 15" /
    "PostgreSQL 16"). "About the same thing" is half their words shared in the same topic; across
    topics it takes at least three shared words and Jaccard ≥ 0.6, so that "Deploys happen on
    Fridays" and "Backups happen on Fridays" stay unrelated.
    """
    wa, wb = content_words(a), content_words(b)
    sim = similarity(wa, wb)
    negations_differ = (wa & _NEGATIONS) != (wb & _NEGATIONS)
    about_the_same = sim >= 0.5 if same_topic else (sim >= 0.6 and len(wa & wb) >= 3)
    if about_the_same and (negations_differ or _value_change(wa, wb)):
        return "contradicts"
    if negations_differ or _value_change(wa, wb):
        return "unrelated"
    if sim >= EQUIVALENT_SIMILARITY or ((wa <= wb or wb <= wa) and min(len(wa), len(wb)) >= 3):
        return "same"
    return "unrelated"


def slot_relation(new: str, old: str) -> str:
    """What a newly proposed fact does to an active fact of its own domain and topic: ``mention``
    (an equivalent restatement: merged into the old one), ``conflict`` (a contradiction: one of the two
    must go) or ``coexist`` (a different point about the topic, or a refinement: both stay)."""
    if equivalent(old, new):
        return "mention"
    return "conflict" if compare(old, new, same_topic=True) == "contradicts" else "coexist"


# --- conflicts -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FactView:
    """What conflict rules and maintenance need of a fact."""

    id: str
    content: str
    veracity: str | None
    confidence: float
    created_at: datetime
    seq: int
    agent: str = ""
    domain: str = ""
    topic: str = ""
    mention_count: int = 1
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """Who won a conflict and by which rule."""

    winner: FactView
    loser: FactView
    rule: str
    detail: str


def decide_conflict(new: FactView, old: FactView, explicit: bool = False) -> Verdict:
    """The documented rules, in order: explicit supersession > veracity > confidence > recency.

    - ``explicit``: ``supersede_fact`` named the old fact, so the new one wins.
    - ``veracity``: the better-sourced statement wins (stated > inferred > imported > tool).
    - ``confidence``: else the more confident one, when they differ by more than 0.05.
    - ``recency``: else the later one (by stream order).
    """
    if explicit:
        return Verdict(new, old, "explicit", "supersede_fact named the old fact")
    wn, wo = (
        VERACITY_WEIGHT.get(new.veracity or "stated", 1.0),
        VERACITY_WEIGHT.get(old.veracity or "stated", 1.0),
    )
    if not math.isclose(wn, wo):
        winner, loser = (new, old) if wn > wo else (old, new)
        return Verdict(winner, loser, "veracity", f"{winner.veracity} outranks {loser.veracity}")
    if abs(new.confidence - old.confidence) > 0.05:
        winner, loser = (new, old) if new.confidence > old.confidence else (old, new)
        return Verdict(
            winner, loser, "confidence", f"confidence {winner.confidence:.2f} > {loser.confidence:.2f}"
        )
    winner, loser = (new, old) if new.seq >= old.seq else (old, new)
    return Verdict(winner, loser, "recency", "the later statement wins")


def clusters(facts: Sequence[FactView], threshold: float = NEAR_DUPLICATE_SIMILARITY) -> list[list[FactView]]:
    """Groups of near-duplicate facts (single linkage on content-word similarity), each of two or more,
    in input order. Statements with different negations or a differing value never join."""
    words = [content_words(f.content) for f in facts]
    parent = list(range(len(facts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(facts)):
        for j in range(i + 1, len(facts)):
            if (
                (words[i] & _NEGATIONS) == (words[j] & _NEGATIONS)
                and not _value_change(words[i], words[j])
                and similarity(words[i], words[j]) >= threshold
            ):
                parent[find(j)] = find(i)
    groups: dict[int, list[FactView]] = {}
    for i, fact in enumerate(facts):
        groups.setdefault(find(i), []).append(fact)
    return [g for g in groups.values() if len(g) > 1]


def keeper(group: Iterable[FactView]) -> FactView:
    """The fact a merge keeps: most confident, then most mentioned, then oldest."""
    return min(group, key=lambda f: (-f.confidence, -f.mention_count, f.seq))


# --- working memory -------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkingMemoryEntry:
    """An item a mind is holding: the memory, its weight now, when it entered, a gist of its content."""

    memory_id: str
    weight: float
    entered_at: datetime
    gist: str = ""


def session_digest(session: str) -> str:
    """A session's short, fixed-size key (16 hex characters of its SHA-256), however long its name."""
    return hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class WorkingMemory:
    """A capacity-limited, decaying set of items (capacity 9 by default), and where the mind's
    sessions are: the latest memory of each of its most recently continued sessions."""

    items: tuple[WorkingMemoryEntry, ...] = ()
    at: datetime | None = None
    capacity: int = DEFAULT_WM_CAPACITY
    sessions: tuple[tuple[str, str], ...] = ()
    """(session digest, latest memory id), oldest first, at most :data:`SESSION_HEADS`. Carried
    whole in ``working_memory.updated``, so whoever decides the mind next continues its chains."""

    def head(self, session: str) -> str | None:
        """The latest memory of a session (by digest), if the mind still knows it."""
        return next((m for s, m in reversed(self.sessions) if s == session), None)

    def continued(self, moved: Sequence[tuple[str, str]]) -> WorkingMemory:
        """The sessions after these moved on (in order): each goes to the end with its new memory;
        the oldest beyond :data:`SESSION_HEADS` are forgotten."""
        if not moved:
            return self
        sessions = list(self.sessions)
        for session, memory in moved:
            sessions = [(s, m) for s, m in sessions if s != session]
            sessions.append((session, memory))
        return replace(self, sessions=tuple(sessions[-SESSION_HEADS:]))

    @functools.cached_property
    def gist_words(self) -> tuple[tuple[frozenset[str], float], ...]:
        """Each item's gist as content words, with its weight (capped at 1), computed once."""
        return tuple((words, min(1.0, i.weight)) for i in self.items if (words := content_words(i.gist)))

    def decayed(self, now: datetime, half_life_minutes: float = WM_HALF_LIFE_MINUTES) -> WorkingMemory:
        """Weights halve every ``half_life_minutes``; items under ``WM_FLOOR`` drop out."""
        if self.at is None or now <= self.at:
            return replace(self, at=now if self.at is None else self.at)
        factor = math.pow(2.0, -(now - self.at).total_seconds() / 60.0 / half_life_minutes)
        kept = tuple(
            replace(i, weight=round(i.weight * factor, 6))
            for i in self.items
            if i.weight * factor >= WM_FLOOR
        )
        return replace(self, items=kept, at=now)

    def admit(self, entries: Sequence[WorkingMemoryEntry], now: datetime) -> WorkingMemory:
        """Decay to ``now``, add (or refresh) the admitted entries, keep the ``capacity`` heaviest."""
        current = {i.memory_id: i for i in self.decayed(now).items}
        # Only the heaviest newcomers can stay: a big cycle admits hundreds, the set holds nine.
        entries = sorted(entries, key=lambda e: -e.weight)[: self.capacity]
        for e in entries:
            old = current.get(e.memory_id)
            if old is None or e.weight > old.weight:
                current[e.memory_id] = replace(e, entered_at=old.entered_at if old else e.entered_at)
        ranked = sorted(current.values(), key=lambda i: (-i.weight, i.entered_at, i.memory_id))
        return replace(self, items=tuple(ranked[: self.capacity]), at=now)


def context_relevance(content: str, wm: WorkingMemory) -> float:
    """How much a candidate bears on what the mind holds: the best overlap with an item's gist
    (shared words over the smaller set), weighted by that item's weight; 0 when memory is empty."""
    if not wm.items:
        return 0.0
    words = content_words(content)
    if not words:
        return 0.0
    best = 0.0
    for gist, weight in wm.gist_words:
        shared = len(words & gist)
        if shared:
            best = max(best, shared / min(len(words), len(gist)) * weight)
    return round(best, 6)
