"""The time a question names, as a window of instants: "on 25 May, 2023", "in June 2022", "in
December", "in 2023", "yesterday", "last week".

Pure: a month without a year and the relative words are resolved against an ``anchor`` — the
present of the timeline searched (the newest memory of the scope, whose "now" a question about a
past conversation shares), given by the caller. The window is a half-open ``[start, end)`` in the
anchor's time zone, widened by half a day on each side so that a day's memories recorded in another
time zone still fall in it. Only the first time named counts; a question naming none has no window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["TimeWindow", "named_window", "names_time"]

_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH = r"(?P<{}>" + "|".join(_MONTHS) + r"|" + "|".join(m[:3] for m in _MONTHS if m != "may") + r")\.?"
_DAY = r"(?P<{}>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<{}>(?:19|20)\d\d)"

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # 25 May, 2023 · 8th December 2023
    ("day", re.compile(rf"\b{_DAY.format('d')}\s+{_MONTH.format('m')},?\s*{_YEAR.format('y')}\b", re.I)),
    # May 25, 2023 · December 1,2023
    ("day", re.compile(rf"\b{_MONTH.format('m')}\s+{_DAY.format('d')},?\s*{_YEAR.format('y')}\b", re.I)),
    # May 2023 · January, 2024
    ("month", re.compile(rf"\b{_MONTH.format('m')},?\s+{_YEAR.format('y')}\b", re.I)),
    # in June · during December (a month alone: the anchor's, or the last one before it)
    ("month", re.compile(rf"\b(?:in|during|of|since|by)\s+{_MONTH.format('m')}\b(?!,?\s*\d)", re.I)),
    # in 2023
    ("year", re.compile(rf"\b(?:in|during|of)\s+{_YEAR.format('y')}\b", re.I)),
    ("yesterday", re.compile(r"\byesterday\b", re.I)),
    ("last_week", re.compile(r"\blast\s+week(?:end)?\b", re.I)),
    ("last_month", re.compile(r"\blast\s+month\b", re.I)),
)

_SLACK = timedelta(hours=12)


@dataclass(frozen=True)
class TimeWindow:
    """The instants a question's time words name: ``start <= t < end``."""

    start: datetime
    end: datetime
    phrase: str
    """The words it was read from."""

    def holds(self, when: datetime) -> bool:
        """Whether ``when`` falls in the window."""
        return self.start <= when < self.end


def _month(name: str) -> int:
    name = name.lower().rstrip(".")
    return next(i for i, m in enumerate(_MONTHS, start=1) if m.startswith(name))


def _month_span(year: int, month: int, anchor: datetime) -> tuple[datetime, datetime]:
    start = anchor.replace(year=year, month=month, day=1, hour=0, minute=0, second=0, microsecond=0)
    end = start.replace(year=year + 1, month=1) if month == 12 else start.replace(month=month + 1)
    return start, end


def names_time(query: str) -> bool:
    """Whether the query names a time at all (cheap: a caller looks up the anchor only then)."""
    return _first(query) is not None


def _first(query: str) -> tuple[str, re.Match[str]] | None:
    best: tuple[str, re.Match[str]] | None = None
    for kind, pattern in _PATTERNS:
        m = pattern.search(query)
        # The first words; of two readings starting together, the longer (more precise) one.
        if m and (best is None or (m.start(), -m.end()) < (best[1].start(), -best[1].end())):
            best = (kind, m)
    return best


def named_window(query: str, anchor: datetime) -> TimeWindow | None:
    """The window of the first time the query names (see the module docstring), or None."""
    found = _first(query)
    if found is None:
        return None
    kind, m = found
    groups = m.groupdict()
    midnight = anchor.replace(hour=0, minute=0, second=0, microsecond=0)
    try:
        if kind == "day":
            day = midnight.replace(year=int(groups["y"]), month=_month(groups["m"]), day=int(groups["d"]))
            start, end = day, day + timedelta(days=1)
        elif kind == "month" and groups.get("y"):
            start, end = _month_span(int(groups["y"]), _month(groups["m"]), anchor)
        elif kind == "month":
            month = _month(groups["m"])
            year = anchor.year if month <= anchor.month else anchor.year - 1
            start, end = _month_span(year, month, anchor)
        elif kind == "year":
            start = midnight.replace(year=int(groups["y"]), month=1, day=1)
            end = start.replace(year=start.year + 1)
        elif kind == "yesterday":
            start, end = midnight - timedelta(days=1), midnight
        elif kind == "last_week":
            start, end = (
                midnight - timedelta(days=7 + midnight.weekday()),
                midnight - timedelta(days=midnight.weekday()),
            )
        else:  # last_month
            first = midnight.replace(day=1)
            start, end = _month_span(
                (first - timedelta(days=1)).year, (first - timedelta(days=1)).month, anchor
            )
    except ValueError:  # 31 February
        return None
    return TimeWindow(start - _SLACK, end + _SLACK, m.group(0))
