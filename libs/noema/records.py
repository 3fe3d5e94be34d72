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

``__repr__`` is the one method the standard dataclass wraps (in ``_recursive_repr``, its guard
against recursion) after ``_create_fn`` made it: the stand-in takes the wrapper's place and wraps
the method when it makes it, so that the class holds the standard wrapper of the standard method
(its ``__doc__``, ``__module__`` and signature), not a wrapper of the stand-in. The replaced
``_create_fn`` defers only in the thread making a ``noema.records`` dataclass: a standard dataclass
made in another thread meanwhile is compiled as ever.

Where ``dataclasses`` has no ``_create_fn`` (Python 3.13 compiles a class's methods together),
this is ``dataclasses.dataclass`` itself. Type checkers see ``dataclasses.dataclass``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]

_CREATE: Callable[..., Any] | None = getattr(dataclasses, "_create_fn", None)


class _Deferred:
    """A generated method not compiled yet: ``dataclasses._create_fn``'s arguments."""

    def __init__(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], wrap: Callable[[Any], Any] | None = None
    ) -> None:
        self._args, self._kwargs, self._wrap = args, kwargs, wrap
        self._made: Any = None
        self.__name__ = self.__qualname__ = str(args[0])

    def _make(self) -> Any:
        if self._made is None:
            assert _CREATE is not None
            made = _CREATE(*self._args, **self._kwargs)
            self._made = made if self._wrap is None else self._wrap(made)
        return self._made

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Called as it is held in the class (``vars(cls)[name](...)``): the method's call."""
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


_DEFERRING = threading.local()  # .on: this thread is making a noema.records dataclass
_SWAP = threading.Lock()
_swapped = 0  # threads making a noema.records dataclass: dataclasses._create_fn is _create_fn


def _create_fn(*args: Any, **kwargs: Any) -> Any:
    """``dataclasses._create_fn`` while a thread makes a ``noema.records`` dataclass: a stand-in
    in that thread, the method itself in any other."""
    if getattr(_DEFERRING, "on", False):
        return _Deferred(args, kwargs)
    assert _CREATE is not None
    return _CREATE(*args, **kwargs)


def _defer_repr(cls: type) -> None:
    """``__repr__`` deferred with its wrapper: made as ``_recursive_repr(method)`` on first use."""
    held = vars(cls).get("__repr__")
    deferred = getattr(held, "__wrapped__", None)
    if isinstance(deferred, _Deferred):
        guard = dataclasses._recursive_repr  # type: ignore[attr-defined]
        cls.__repr__ = _Deferred(deferred._args, deferred._kwargs, wrap=guard)  # type: ignore[method-assign]


if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:

    def dataclass(cls=None, /, **options):
        """``dataclasses.dataclass(cls, **options)``, its methods compiled on first use."""

        def wrap(cls):
            global _swapped
            if _CREATE is None:
                return dataclasses.dataclass(cls, **options)
            with _SWAP:
                _swapped += 1
                dataclasses._create_fn = _create_fn
            deferring, _DEFERRING.on = getattr(_DEFERRING, "on", False), True
            try:
                made = dataclasses.dataclass(cls, **options)
            finally:
                _DEFERRING.on = deferring
                with _SWAP:
                    _swapped -= 1
                    if not _swapped:
                        dataclasses._create_fn = _CREATE
            _defer_repr(made)
            return made

        return wrap if cls is None else wrap(cls)
