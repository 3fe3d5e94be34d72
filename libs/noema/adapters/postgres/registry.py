"""How projection handlers are declared: each names the one event type it handles, once, and gets
its run of events already narrowed to that type.

The projector groups a batch into runs of consecutive events of one type and looks each run's
handler up in a :class:`Handlers` table. A handler module fills its table by registration::

    HANDLERS = Handlers()

    @HANDLERS.register(MemoryCreated)
    async def memory_created(conn: asyncpg.Connection, run: Run[MemoryCreated]) -> None:
        for item, ev in run: ...  # ev is a MemoryCreated; item has its seq and subject

so the table and the handlers' types cannot drift apart, and a second handler of one type is an
error at import instead of silently replacing the first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from functools import wraps
from typing import TypeVar

import asyncpg

from noema.ports import Projected
from noema_events import Event

__all__ = ["Handler", "Handlers", "Projected", "Run", "TypedHandler"]

E = TypeVar("E", bound=Event)


Run = Sequence[tuple[Projected, E]]
"""What a handler of ``E`` receives: its events in stream order, each beside its :class:`Projected`."""

TypedHandler = Callable[[asyncpg.Connection, Run[E]], Awaitable[None]]
"""A handler as written: of one event type ``E``."""

Handler = Callable[[asyncpg.Connection, Sequence[Projected]], Awaitable[None]]
"""A handler as the projector calls it: of any run (registration checks and narrows the events)."""


class Handlers(Mapping[type[Event], Handler]):
    """Event type → handler, filled by :meth:`register`; each type has at most one handler."""

    def __init__(self) -> None:
        self._by_type: dict[type[Event], Handler] = {}

    @classmethod
    def joined(cls, *tables: Mapping[type[Event], Handler]) -> Handlers:
        """One table of the handlers of several, refusing a type that two of them handle."""
        joined = cls()
        for table in tables:
            for event_type, handler in table.items():
                joined.add(event_type, handler)
        return joined

    def register(self, event_type: type[E]) -> Callable[[TypedHandler[E]], TypedHandler[E]]:
        """Decorator: ``handler`` handles the runs of ``event_type``; the handler is returned as is."""

        def add(handler: TypedHandler[E]) -> TypedHandler[E]:
            self.add(event_type, _narrowing(event_type, handler))
            return handler

        return add

    def add(self, event_type: type[Event], handler: Handler) -> None:
        """Make ``handler`` the handler of ``event_type``; ``ValueError`` if it already has one."""
        existing = self._by_type.get(event_type)
        if existing is not None:
            raise ValueError(
                f"{event_type.__name__} already has a projection handler ({_name(existing)}); "
                f"{_name(handler)} cannot handle it too"
            )
        self._by_type[event_type] = handler

    def __getitem__(self, event_type: type[Event]) -> Handler:
        return self._by_type[event_type]

    def __iter__(self) -> Iterator[type[Event]]:
        return iter(self._by_type)

    def __len__(self) -> int:
        return len(self._by_type)


def _narrowing(event_type: type[E], handler: TypedHandler[E]) -> Handler:
    """``handler`` as the projector calls it: each event checked to be an ``event_type``."""

    @wraps(handler)
    async def handle(conn: asyncpg.Connection, run: Sequence[Projected]) -> None:
        await handler(conn, [(item, _event_of(item, event_type, handler)) for item in run])

    return handle


def _event_of(item: Projected, event_type: type[E], handler: TypedHandler[E]) -> E:
    event = item.event
    if not isinstance(event, event_type):
        # The projector only hands a handler the runs of its own type; anything else is a bug.
        raise TypeError(
            f"{_name(handler)} handles {event_type.__name__}, "
            f"not the {type(event).__name__} at stream seq {item.seq}"
        )
    return event


def _name(handler: Callable[..., object]) -> str:
    return getattr(handler, "__qualname__", repr(handler))
