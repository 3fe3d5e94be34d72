"""Noema's event catalog: the envelope, every event version, the vocabulary and the codec.

This package depends only on msgspec so that publishers and SDKs can use it without the server.
"""

from .catalog import *  # noqa: F403
from .catalog import __all__ as _catalog_all
from .codec import EventDecodeError, decode_event, encode_event, upcast
from .envelope import NAME_PATTERN, Event, Name

__all__ = [
    *_catalog_all,
    "NAME_PATTERN",
    "Event",
    "EventDecodeError",
    "Name",
    "decode_event",
    "encode_event",
    "upcast",
]
