"""Answers the memory explorer is drawn from: the vocabulary and a memory's graph neighbourhood."""

from __future__ import annotations

from datetime import datetime

import msgspec

__all__ = ["Channel", "GraphEdge", "GraphNode", "MemoryTypeInfo", "Neighbourhood", "Vocabulary"]


class Channel(msgspec.Struct, frozen=True, kw_only=True):
    """A channel and the credibility its trust gives a record."""

    name: str
    credibility: float


class MemoryTypeInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A memory type (decay class) with its Weibull parameters (``scale_days`` null: never fades)."""

    name: str
    shape: float
    scale_days: float | None
    why: str


class Vocabulary(msgspec.Struct, frozen=True, kw_only=True):
    """Every closed list the API's inputs and records use, from the event catalog's one source."""

    memory_kinds: list[str]
    epistemic_kinds: list[str]
    memory_statuses: list[str]
    memory_types: list[MemoryTypeInfo]
    relations: list[str]
    channels: list[Channel]
    veracities: list[str]
    access_levels: list[str]
    access_modes: list[str]
    search_modes: list[str]


class GraphNode(msgspec.Struct, frozen=True, kw_only=True):
    """A memory in the neighbourhood, ``depth`` hops from the one asked for (0: that one)."""

    id: str
    content: str
    status: str
    kind: str
    epistemic_kind: str
    depth: int


class GraphEdge(msgspec.Struct, frozen=True, kw_only=True):
    """A relationship between two memories of the neighbourhood."""

    id: str
    relation: str
    from_id: str
    to_id: str
    confidence: float
    source: str
    created_at: datetime


class Neighbourhood(msgspec.Struct, frozen=True, kw_only=True):
    """The memories within two relationship hops of ``root`` and the edges between them."""

    root: str
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    truncated: bool
    """Whether the walk stopped at the node limit (there is more beyond what is drawn)."""
