"""The route table: every endpoint of the operator API, grouped by area."""

from __future__ import annotations

from ..endpoint import Endpoint
from . import audit, deadletters, erasure, explorer, knowledge, memories, operator, system

__all__ = ["ENDPOINTS"]

ENDPOINTS: tuple[Endpoint, ...] = (
    *system.ENDPOINTS,
    *audit.ENDPOINTS,
    *memories.ENDPOINTS,
    *explorer.ENDPOINTS,
    *operator.ENDPOINTS,
    *knowledge.ENDPOINTS,
    *deadletters.ENDPOINTS,
    *erasure.ENDPOINTS,
)
"""Every endpoint, in the order the OpenAPI document lists them."""
