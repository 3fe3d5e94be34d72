"""Noema's event catalog: the envelope, every event version, the vocabulary and the codec.

This package depends only on msgspec so that publishers and SDKs can use it without the server.
"""

from .bounded import OutOfBounds, Undecodable, check_bounds, check_value_depth, decode_json
from .catalog import *  # noqa: F403
from .catalog import __all__ as _catalog_all
from .codec import KNOWN_TAGS, EventDecodeError, Recorded, decode_event, decode_recorded, encode_event, upcast
from .envelope import NAME_PATTERN, Event, Name

__all__ = [
    *_catalog_all,
    "KNOWN_TAGS",
    "NAME_PATTERN",
    "Event",
    "EventDecodeError",
    "Name",
    "OutOfBounds",
    "Recorded",
    "Undecodable",
    "check_bounds",
    "check_value_depth",
    "decode_event",
    "decode_json",
    "decode_recorded",
    "encode_event",
    "upcast",
]
