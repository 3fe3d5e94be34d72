"""How projection handlers are declared: each names the one event type it handles, once, and gets
its run of events already narrowed to that type.

The projector groups a batch into runs of events of one type and looks each run's handler up in a
:class:`Handlers` table. A handler module fills its table by registration, declaring with each
handler the rows it reads or writes (its *footprint*, which lets events that touch different rows be
applied together: :mod:`~noema.adapters.postgres.commuting`)::

    HANDLERS = Handlers()

    @HANDLERS.register(MemoryCreated, touches=lambda ev: frozenset({("memory", ev.payload.memory_id)}))
    async def memory_created(conn: asyncpg.Connection, run: Run[MemoryCreated]) -> None:
        for item, ev in run: ...  # ev is a MemoryCreated; item has its seq and subject

so the table, the handlers' types and the rows they touch cannot drift apart, and a second handler
of one type is an error at import instead of silently replacing the first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping, Sequence
from functools import wraps
from typing import Any, TypeVar

import asyncpg

from noema.ports import Projected
from noema_events import Event

__all__ = ["ANYTHING", "Footprint", "Handler", "Handlers", "Projected", "Run", "TypedHandler"]

E = TypeVar("E", bound=Event)

Footprint = frozenset[Hashable] | None
"""The keys of the rows an event's handler reads or writes; None: it may touch any row.

A memory's key (``("memory", id)``) stands for its row and everything hanging off it that a handler
checks: its vectors (which need it to exist), the edges whose ends it is (a foreign key reads it)."""

ANYTHING: Footprint = None
"""The footprint of a barrier: a handler that declares none may touch anything."""


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
        self._touches: dict[type[Event], Callable[[Any], Footprint]] = {}

    @classmethod
    def joined(cls, *tables: Mapping[type[Event], Handler]) -> Handlers:
        """One table of the handlers of several (with their footprints), refusing a type that two
        of them handle."""
        joined = cls()
        for table in tables:
            declared = table._touches if isinstance(table, Handlers) else {}
            for event_type, handler in table.items():
                joined.add(event_type, handler, declared.get(event_type))
        return joined

    def register(
        self, event_type: type[E], *, touches: Callable[[E], Footprint] | None = None
    ) -> Callable[[TypedHandler[E]], TypedHandler[E]]:
        """Decorator: ``handler`` handles the runs of ``event_type``, touching the rows ``touches``
        names for each event (not given: any row, a barrier); the handler is returned as is."""

        def add(handler: TypedHandler[E]) -> TypedHandler[E]:
            self.add(event_type, _narrowing(event_type, handler), touches)
            return handler

        return add

    def add(
        self, event_type: type[Event], handler: Handler, touches: Callable[[Any], Footprint] | None = None
    ) -> None:
        """Make ``handler`` the handler of ``event_type`` (touching what ``touches`` names; not
        given: anything); ``ValueError`` if the type already has one."""
        existing = self._by_type.get(event_type)
        if existing is not None:
            raise ValueError(
                f"{event_type.__name__} already has a projection handler ({_name(existing)}); "
                f"{_name(handler)} cannot handle it too"
            )
        self._by_type[event_type] = handler
        if touches is not None:
            self._touches[event_type] = touches

    def touches(self, event: Event) -> Footprint:
        """The rows the handler of ``event`` reads or writes, as registered: none when no handler
        applies it (it is only kept in ``events``, which no handler reads), :data:`ANYTHING` when its
        handler declared none."""
        kind = type(event)
        if kind not in self._by_type:
            return frozenset()
        declared = self._touches.get(kind)
        return ANYTHING if declared is None else declared(event)

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
