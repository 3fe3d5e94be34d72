"""``noema.records.dataclass`` makes the standard library's dataclasses, each method compiled on
first use: the same classes, methods and errors as ``dataclasses.dataclass``."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import threading
from typing import Any, ClassVar

import pytest

from noema import records


def _classes(decorate: Any) -> dict[str, Any]:
    """The same classes, made by ``decorate``: frozen, plain, slotted, keyword-only, derived."""

    @decorate(frozen=True)
    class Point:
        """A frozen point."""

        x: int
        y: int = 0
        tags: tuple[str, ...] = ()
        seen: list[int] = dataclasses.field(default_factory=list, compare=False, repr=False)
        unit: ClassVar[str] = "m"

    @decorate
    class Mutable:
        a: int
        b: str = "b"

    @decorate(frozen=True, slots=True)
    class Slotted:
        """Slotted."""

        a: int
        b: float = 1.5

    @decorate(frozen=True, kw_only=True)
    class Options:
        """Keyword-only, with a check after init."""

        limit: int = 10
        name: str

        def __post_init__(self) -> None:
            if self.limit < 1:
                raise ValueError("limit below 1")

    @decorate(frozen=True)
    class Derived(Point):
        """Derived from a frozen point."""

        z: int = 5

    @decorate(eq=False)
    class NoEq:
        """No equality of its own."""

        a: int

    @decorate(frozen=True)
    class Node:
        """Refers to itself."""

        children: list[Any] = dataclasses.field(default_factory=list)

    return {c.__name__: c for c in (Point, Mutable, Slotted, Options, Derived, NoEq, Node)}


STANDARD = _classes(dataclasses.dataclass)
DEFERRED = _classes(records.dataclass)


def _outcome(call: Any) -> Any:
    try:
        return ("value", call())
    except Exception as exc:  # what is compared is the error
        return ("error", type(exc).__name__, str(exc))


def _behaviour(classes: dict[str, Any]) -> list[Any]:
    """What code sees of the classes: construction, repr, equality, hash, errors, dataclass API."""
    point, mutable, slotted = classes["Point"], classes["Mutable"], classes["Slotted"]
    options, derived, no_eq, node = classes["Options"], classes["Derived"], classes["NoEq"], classes["Node"]
    p = point(1, tags=("a",))
    d = derived(1, 2, z=3)
    looped = node()
    looped.children.append(looped)

    def frozen_set() -> None:
        p.x = 2

    def frozen_del() -> None:
        del p.x

    def other_attribute() -> None:
        p.other = 1

    def slotted_set() -> None:
        slotted(1).b = 2.0

    def mutate() -> Any:
        m = mutable(1)
        m.a = 7
        return m.a

    return [
        repr(p),
        repr(d),
        repr(mutable(2)),
        repr(slotted(3)),
        repr(options(name="n")),
        repr(looped),
        p == point(1, tags=("a",)),
        p == point(2),
        p == (1, 0, ("a",)),
        point.__eq__(p, 1),
        hash(p) == hash(point(1, tags=("a",))),
        hash(slotted(1)) == hash(slotted(1)),
        mutable.__hash__,
        no_eq(1) == no_eq(1),
        d == derived(1, 2, z=3),
        mutate(),
        _outcome(frozen_set),
        _outcome(frozen_del),
        _outcome(other_attribute),
        _outcome(slotted_set),
        _outcome(lambda: point()),
        _outcome(lambda: point(1, 2, (), [], 5)),
        _outcome(lambda: point(1, q=2)),
        _outcome(lambda: options(1, name="x")),
        _outcome(lambda: options()),
        _outcome(lambda: options(limit=0, name="x")),
        str(inspect.signature(point)),
        str(inspect.signature(options)),
        str(inspect.signature(derived)),
        point.__doc__,
        mutable.__doc__,
        point.__init__.__qualname__,
        point.__match_args__,
        slotted.__slots__,
        options.__match_args__,
        repr(point.__dataclass_params__),
        [(f.name, f.default, f.default_factory, f.repr, f.compare, f.kw_only) for f in dataclasses.fields(d)],
        dataclasses.asdict(d),
        repr(dataclasses.replace(p, y=4)),
        repr(copy.deepcopy(d)),
        repr(copy.copy(slotted(2))),
        slotted(2).__getstate__(),
        dataclasses.is_dataclass(p),
    ]


def test_the_classes_behave_as_the_standard_librarys() -> None:
    standard, deferred = _behaviour(STANDARD), _behaviour(DEFERRED)
    for ours, theirs in zip(deferred, standard, strict=True):
        assert ours == theirs


def test_a_method_is_compiled_when_first_used_and_put_in_its_class() -> None:
    point = _classes(records.dataclass)["Point"]
    assert not inspect.isfunction(vars(point)["__eq__"])  # not compiled yet
    assert point(1) == point(1)
    assert inspect.isfunction(vars(point)["__eq__"])  # compiled, in the class
    assert inspect.isfunction(vars(point)["__init__"])
    assert not inspect.isfunction(vars(point)["__hash__"])  # never used


def test_a_subclass_compiles_its_bases_method_into_the_base() -> None:
    classes = _classes(records.dataclass)
    base, derived = classes["Point"], classes["Derived"]
    assert not inspect.isfunction(vars(base)["__setattr__"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.__setattr__(derived(1), "x", 2)
    assert inspect.isfunction(vars(base)["__setattr__"])
    assert base.__setattr__.__qualname__ == "_classes.<locals>.Point.__setattr__"


def test_the_standard_dataclass_is_left_as_it_was() -> None:
    assert dataclasses._create_fn is records._CREATE  # type: ignore[attr-defined]

    @dataclasses.dataclass
    class After:
        a: int

    assert inspect.isfunction(vars(After)["__init__"])


def test_the_repr_is_the_standard_wrapper_of_the_standard_method() -> None:
    """The standard dataclass wraps ``__repr__`` in its guard against recursion: the wrapper of
    the stand-in had the stand-in's ``__doc__`` and ``__module__``, and no signature."""
    for name in ("Point", "Slotted", "Node"):
        standard, deferred = STANDARD[name], _classes(records.dataclass)[name]
        assert not inspect.isfunction(vars(deferred)["__repr__"])  # not made yet
        assert str(inspect.signature(deferred.__repr__)) == str(inspect.signature(standard.__repr__))
        assert deferred.__repr__.__doc__ is standard.__repr__.__doc__ is None
        assert deferred.__repr__.__module__ == standard.__repr__.__module__ == __name__
        assert inspect.isfunction(vars(deferred)["__repr__"].__wrapped__)
        assert vars(vars(deferred)["__repr__"]).keys() == vars(vars(standard)["__repr__"]).keys()
    node = DEFERRED["Node"]()
    node.children.append(node)
    assert repr(node) == "_classes.<locals>.Node(children=[...])"  # the guard holds


def test_a_standard_dataclass_made_in_another_thread_meanwhile_is_compiled() -> None:
    """``dataclasses._create_fn`` is replaced while a ``noema.records`` dataclass is made: a
    standard dataclass made by another thread at that moment has its methods compiled."""
    made: dict[str, type] = {}

    def other() -> None:
        @dataclasses.dataclass
        class Standard:
            x: int

        made["class"] = Standard

    class Default:
        """A descriptor default: the dataclass reads it while it makes the class."""

        def __get__(self, instance: object, owner: type | None = None) -> int:
            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
            return 0

    @records.dataclass
    class Deferred:
        y: int = Default()  # type: ignore[assignment]

    standard = made["class"]
    assert all(inspect.isfunction(vars(standard)[n]) for n in ("__init__", "__repr__", "__eq__"))
    assert vars(standard)["__repr__"].__doc__ is None
    assert not inspect.isfunction(vars(Deferred)["__eq__"])  # deferred in its own thread
    assert dataclasses._create_fn is records._CREATE  # type: ignore[attr-defined]
