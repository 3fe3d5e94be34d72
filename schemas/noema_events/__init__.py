"""Noema's event catalog: the envelope, every event version, the vocabulary and the codec.

This package depends only on msgspec so that publishers and SDKs can use it without the server.

Its names load with the module that defines them, on first use: importing a light module of the
package (:mod:`noema_events.vocabulary`, :mod:`noema_events.envelope`) does not build the catalog
or the codec (``noemactl --help`` shows the vocabulary; issue 32, its start-up).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what each name is, for the type checker (re-exported: `X as X`)
    from .bounded import OutOfBounds as OutOfBounds
    from .bounded import Undecodable as Undecodable
    from .bounded import check_bounds as check_bounds
    from .bounded import check_value_depth as check_value_depth
    from .bounded import decode_json as decode_json
    from .catalog import *  # noqa: F403
    from .codec import KNOWN_TAGS as KNOWN_TAGS
    from .codec import EventDecodeError as EventDecodeError
    from .codec import Recorded as Recorded
    from .codec import decode_event as decode_event
    from .codec import decode_recorded as decode_recorded
    from .codec import encode_event as encode_event
    from .codec import upcast as upcast
    from .envelope import Event as Event
    from .envelope import Name as Name
    from .vocabulary import NAME_PATTERN as NAME_PATTERN

_HOMES = {
    "KNOWN_TAGS": "codec",
    "NAME_PATTERN": "vocabulary",
    "Event": "envelope",
    "EventDecodeError": "codec",
    "Name": "envelope",
    "OutOfBounds": "bounded",
    "Recorded": "codec",
    "Undecodable": "bounded",
    "check_bounds": "bounded",
    "check_value_depth": "bounded",
    "decode_event": "codec",
    "decode_json": "bounded",
    "decode_recorded": "codec",
    "encode_event": "codec",
    "upcast": "codec",
}
"""The module of each name that is not the catalog's (every other public name is); ``__all__``
is the catalog's and these, made on first use (``from noema_events import *``)."""


def __getattr__(name: str) -> Any:
    """A public name (or ``__all__``), from its module, loaded now (then kept here)."""
    if name == "__all__":
        from .catalog import __all__ as catalog_all

        value: Any = [*catalog_all, *_HOMES]
    elif name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        home = importlib.import_module(f".{_HOMES.get(name, 'catalog')}", __name__)
        try:
            value = getattr(home, name)
        except AttributeError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__getattr__("__all__")})
