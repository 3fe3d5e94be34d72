"""The one reading of a date or time given as text, by every surface (``noemactl`` options, the HTTP
API's query parameters and JSON bodies, the agent tools' inputs; see :mod:`noema.inputs`): an
RFC 3339 timestamp, an ISO timestamp without a zone (taken as UTC) or a plain date (midnight UTC;
as an ``until`` bound, the end of that day, so ``--until 2026-03-01`` includes March 1). Anything
else is refused with a message naming the parameter and these forms."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

from noema.errors import Kind, NoemaError

if TYPE_CHECKING:
    import msgspec

__all__ = ["FORMS", "UPPER_BOUNDS", "Instant", "InvalidInstant", "parse_instant"]

FORMS = (
    "an RFC 3339 timestamp (2026-03-01T09:30:00Z, 2026-03-01T09:30:00+01:00), "
    "an ISO timestamp without a zone, taken as UTC (2026-03-01T09:30:00), "
    "or a date, meaning midnight UTC (2026-03-01; as until, the end of that day)"
)
"""The accepted forms, as written in messages and help."""

UPPER_BOUNDS = frozenset({"until"})
"""Parameters that end a period (before this time). Given a plain date they mean the end of that day:
whoever asks for memories until March 1 means March 1 included, not "before March 1 began"."""

if TYPE_CHECKING:
    Instant = Annotated[datetime, msgspec.Meta(tz=True, description=f"A date or time: {FORMS}.")]
    """A date or time in a Struct; :func:`noema.inputs.convert` reads its text with :func:`parse_instant`."""


def __getattr__(name: str) -> Any:
    """``Instant``, made on first use with msgspec's constraints: what shows the forms (``noemactl
    --help``) or parses a date (:func:`parse_instant`) loads no msgspec (issue 32: its start-up)."""
    if name != "Instant":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import msgspec

    instant = Annotated[datetime, msgspec.Meta(tz=True, description=f"A date or time: {FORMS}.")]
    globals()["Instant"] = instant
    return instant


_FORM = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})"
    r"(?:[Tt ](?P<time>\d{2}:\d{2}(?::\d{2})?)(?:\.(?P<fraction>\d{1,9}))?(?P<zone>[Zz]|[+-]\d{2}:\d{2})?)?"
)


class InvalidInstant(NoemaError, ValueError):
    """The text is not one of the accepted forms; the message names the parameter and the forms."""

    kind = Kind.INVALID


def parse_instant(value: str | datetime, name: str) -> datetime:
    """``value`` as a datetime in UTC (a datetime without a zone is taken as UTC); an instant outside
    the representable range (year 1 to 9999 in UTC) is refused.

    ``name`` is the parameter's name, as the user wrote it (e.g. ``since`` or ``--valid-until``); a
    plain date given to one of :data:`UPPER_BOUNDS` means the next midnight (the end of that day).
    """
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        try:
            return aware.astimezone(UTC)
        except OverflowError:
            raise InvalidInstant(
                f"{name}: {value.isoformat()} is out of the range of dates and times"
            ) from None
    found = _FORM.fullmatch(value.strip()) if isinstance(value, str) else None
    when = None
    if found:
        iso = found["date"]
        day_end = not found["time"] and name.lstrip("-") in UPPER_BOUNDS
        if found["time"]:
            iso += "T" + found["time"]
            if found["fraction"]:
                iso += "." + found["fraction"][:6].ljust(6, "0")
            zone = found["zone"] or ""
            iso += "+00:00" if zone in ("Z", "z") else zone
        try:
            when = datetime.fromisoformat(iso)
            when = (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
            if day_end:
                when += timedelta(days=1)
        except ValueError:
            when = None
        except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00, before the first representable instant
            raise InvalidInstant(f"{name}: {value!r} is out of the range of dates and times") from None
    if when is None:
        # "2026-01-01T10:00:00 01:00": a "+" sent unencoded in a URL arrives as a space.
        plus = isinstance(value, str) and re.search(r"\d \d{2}:\d{2}$", value.strip()) is not None
        hint = " (in a URL, write the '+' of a time zone as %2B)" if plus else ""
        raise InvalidInstant(f"{name}: {value!r} is not a date or time{hint}; give {FORMS}")
    return when
