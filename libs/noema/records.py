"""``dataclass``: the standard library's, each generated method compiled when it is first used.

``dataclasses.dataclass`` writes each method it generates (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, a frozen class's ``__setattr__`` and ``__delattr__``) as source and compiles it when
the class is made: about 0.6 M instructions per method, some 3.5 M for a small frozen dataclass,
whether or not a process ever makes an instance of it. A keyword search of ``noemactl`` made 31 of
them on its way and used few (issue 32: its start-up).

This ``dataclass`` is the standard one, run with its ``_create_fn`` (where it compiles each method)
replaced by one that defers the compilation: the method put in the class is a stand-in that calls
the standard ``_create_fn`` with the same source when the method is first looked up or called, and
puts the function it makes in the class in its own place. Everything else (the fields, their
checks, ``__dataclass_params__``, ``__match_args__``, slots, ``replace``/``asdict``) is the standard
dataclass's, and so is every method once made: the same source, compiled later.
``tests/unit/test_records.py`` compares the classes with those of ``dataclasses.dataclass``.

Where ``dataclasses`` has no ``_create_fn`` (Python 3.13 compiles a class's methods together),
this is ``dataclasses.dataclass`` itself. Type checkers see ``dataclasses.dataclass``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]

_CREATE: Callable[..., Any] | None = getattr(dataclasses, "_create_fn", None)


class _Deferred:
    """A generated method not compiled yet: ``dataclasses._create_fn``'s arguments."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._args, self._kwargs = args, kwargs
        self._made: Any = None
        self.__name__ = self.__qualname__ = str(args[0])

    def _make(self) -> Any:
        if self._made is None:
            assert _CREATE is not None
            self._made = _CREATE(*self._args, **self._kwargs)
        return self._made

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Called through a wrapper (``__repr__``'s guard against recursion holds the method)."""
        return self._make()(*args, **kwargs)

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        """Looked up on a class or an instance: compiled, and put in the class in its place."""
        made = self._make()
        for klass in (owner or type(instance)).__mro__:
            if klass.__dict__.get(made.__name__) is self:
                made.__qualname__ = f"{klass.__qualname__}.{made.__name__}"
                setattr(klass, made.__name__, made)
                break
        return made if instance is None else made.__get__(instance, owner)


def _deferred(*args: Any, **kwargs: Any) -> _Deferred:
    return _Deferred(args, kwargs)


if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:

    def dataclass(cls=None, /, **options):
        """``dataclasses.dataclass(cls, **options)``, its methods compiled on first use."""

        def wrap(cls):
            if _CREATE is None:
                return dataclasses.dataclass(cls, **options)
            dataclasses._create_fn = _deferred
            try:
                return dataclasses.dataclass(cls, **options)
            finally:
                # Another thread's dataclass made meanwhile gets deferred methods too: the same.
                dataclasses._create_fn = _CREATE

        return wrap if cls is None else wrap(cls)
