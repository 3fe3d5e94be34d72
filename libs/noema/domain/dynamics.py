"""Memory dynamics as pure functions: activation decay and reinforcement, Weibull survival,
confidence from veracity. The projector's SQL implements the same formulas (a test compares them),
so replay reproduces every value.

Activation (accessibility), in (0, 1]:

- decay over ``dt`` days: ``A · 2^(-dt / (H · (1 + importance)))`` with half-life ``H`` = 14 days,
  so importance 1 doubles the half-life; never below ``ACTIVATION_FLOOR`` (never zero, never deleted).
- retrieval: decay to the retrieval time, then ``A + RECALL_BOOST · (1 − A)``.

Nothing rewrites activation as time passes: a memory stores the activation its last reinforcement
(or its creation) left and the half-life and floor that event recorded, and a read computes the
activation at its own ``now`` in closed form (:func:`current_activation`, SQL ``noema_activation``).
One decay per interval between reinforcements means the floor composes trivially, and a new
half-life takes effect from each memory's next recorded reinforcement or creation.

Confidence, in [0, 1): seeded with the veracity weight ``w`` (stated 1.0 → capped to ``CONFIDENCE_CAP``);
each re-mention adds ``MENTION_RATE · w · (1 − c)``: bounded below 1, larger for better sources.
``n`` mentions at once (a merge of ``n`` facts) do what ``n`` single ones would: ``(1 − c)`` shrinks by
``(1 − MENTION_RATE · w)^n``.

These constants are today's policy, read where a decision is made (attend, retrieve, decay, the
knowledge operations, the conflicts worker), and each decision records the values it used in its
event; the projection applies the recorded values and reads none of them, so changing one changes
future decisions, never history.
"""

from __future__ import annotations

import math
from datetime import datetime

from noema_events.vocabulary import MEMORY_TYPES, VERACITY_WEIGHT

__all__ = [
    "ACTIVATION_FLOOR",
    "CONFIDENCE_CAP",
    "FACT_IMPORTANCE",
    "FACT_SALIENCE",
    "FADE_THRESHOLD",
    "HALF_LIFE_DAYS",
    "MENTION_RATE",
    "RECALL_BOOST",
    "current_activation",
    "decay_activation",
    "initial_confidence",
    "mention_confidence",
    "mention_rate",
    "reinforce_activation",
    "weibull_survival",
]

HALF_LIFE_DAYS = 14.0
ACTIVATION_FLOOR = 1e-6
RECALL_BOOST = 0.3
MENTION_RATE = 0.25
CONFIDENCE_CAP = 0.99
FADE_THRESHOLD = 0.05
"""A decay tick lists the memories whose activation fell below this since the previous tick (about
two months without recall at importance 0, four at importance 1)."""
FACT_IMPORTANCE = 0.5
FACT_SALIENCE = 0.5
"""The importance and salience of a fact written to a domain (a fact has no observation to weigh)."""


def decay_activation(
    activation: float,
    dt_days: float,
    importance: float,
    half_life_days: float = HALF_LIFE_DAYS,
    floor: float = ACTIVATION_FLOOR,
) -> float:
    """Activation after ``dt_days`` without retrieval (no change for ``dt_days <= 0``), never below
    ``floor``."""
    if dt_days <= 0:
        return activation
    # The exponent is bounded as in SQL (where power() would underflow); the floor applies long before.
    exponent = max(-1000.0, -dt_days / (half_life_days * (1.0 + importance)))
    return max(floor, activation * math.pow(2.0, exponent))


def current_activation(
    activation: float,
    activation_at: datetime,
    importance: float,
    half_life_days: float,
    floor: float,
    at: datetime,
) -> float:
    """A memory's activation at ``at``, from the activation stored at ``activation_at`` (its last
    reinforcement or creation) and the half-life and floor recorded with it: what every read shows."""
    return decay_activation(
        activation, (at - activation_at).total_seconds() / 86400.0, importance, half_life_days, floor
    )


def reinforce_activation(activation: float, boost: float = RECALL_BOOST) -> float:
    """Activation after a retrieval (already decayed to the retrieval time)."""
    return activation + boost * (1.0 - activation)


def weibull_survival(memory_type: str, age_days: float) -> float:
    """Weibull survival factor of a memory type at an age, in (0, 1]; unknown types use ``observation``."""
    spec = MEMORY_TYPES.get(memory_type, MEMORY_TYPES["observation"])
    if spec.scale_days is None or age_days <= 0:
        return 1.0
    return max(1e-12, math.exp(-math.pow(age_days / spec.scale_days, spec.shape)))


def initial_confidence(veracity: str | None) -> float:
    """Starting confidence of a record of this veracity (None: an observation, taken at face value)."""
    weight = VERACITY_WEIGHT.get(veracity or "stated", 1.0)
    return min(CONFIDENCE_CAP, weight)


def mention_rate(veracity: str | None, mentions: int = 1) -> float:
    """The share of the remaining doubt ``1 − c`` that ``mentions`` mentions by a source of this
    veracity remove (one mention: exactly ``MENTION_RATE · w``, as stored events have always used)."""
    rate = MENTION_RATE * VERACITY_WEIGHT.get(veracity or "stated", 1.0)
    return rate if mentions == 1 else 1.0 - (1.0 - rate) ** mentions


def mention_confidence(confidence: float, veracity: str | None, mentions: int = 1) -> float:
    """Confidence after the same fact is mentioned again (``mentions`` times) by a source of this
    veracity."""
    return min(CONFIDENCE_CAP, confidence + mention_rate(veracity, mentions) * (1.0 - confidence))
