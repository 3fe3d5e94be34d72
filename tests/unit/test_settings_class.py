"""The settings classes' hand-written ``__init__`` (issue 32) behaves as a generated one does.

:func:`noema.runtime.settings._settings_class` writes ``__init__`` once instead of having
``dataclasses`` generate it for each class (``__repr__``, ``__eq__`` and ``__hash__`` are generated,
compiled on first use: :mod:`noema.records`); each test compares
:class:`Settings` and :class:`Located` with a real ``@dataclass(frozen=True, kw_only=True)`` of the
same fields.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from noema.adapters.nats_auth import NatsAuth
from noema.runtime.settings import Located, Settings


def _reference(cls: type) -> Any:
    """A generated dataclass with the same name, fields and parameters as ``cls``."""
    specs = []
    for f in dataclasses.fields(cls):
        kwargs: dict[str, Any] = {"repr": f.repr, "compare": f.compare, "hash": f.hash, "init": f.init}
        if f.default is not dataclasses.MISSING:
            kwargs["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            kwargs["default_factory"] = f.default_factory
        specs.append((f.name, f.type, dataclasses.field(**kwargs)))
    made = dataclasses.make_dataclass(cls.__name__, specs, frozen=True, kw_only=True)
    made.__qualname__ = cls.__qualname__
    return made


VALUES: dict[str, Any] = {
    "data_dir": Path("/srv/noema"),
    "nats_url": "nats://u:secret@127.0.0.1:4222",
    "database_url": "postgresql://o:pw@127.0.0.1/noema",
    "nats_auth": NatsAuth(user="u", password="secret"),
    "api_port": 9000,
    "status_workers": ("api", "attend"),
    "metrics_port": 0,
    "rate_limit": 2.5,
}


@pytest.mark.parametrize("cls", [Settings, Located])
def test_the_same_fields_order_and_parameters_as_a_dataclass(cls: type) -> None:
    assert dataclasses.is_dataclass(cls)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen
    assert [f.name for f in dataclasses.fields(cls)] == [f.name for f in dataclasses.fields(_reference(cls))]
    assert cls.__match_args__ == ()  # type: ignore[attr-defined]


@pytest.mark.parametrize("values", [{}, VALUES], ids=["defaults", "given"])
@pytest.mark.parametrize("cls", [Settings, Located])
def test_init_repr_eq_and_hash_as_generated(cls: type, values: dict[str, Any]) -> None:
    if cls is Located:
        values = {"nats_url": "nats://127.0.0.1:4222", "database_url": "postgresql://x/y", **values}
    ours, theirs = cls(**values), _reference(cls)(**values)
    for f in dataclasses.fields(cls):
        assert getattr(ours, f.name) == getattr(theirs, f.name), f.name
    assert repr(ours) == repr(theirs)
    assert "secret" not in repr(ours)  # nats_url is repr=False
    assert hash(ours) == hash(theirs)
    assert ours == cls(**values)
    assert hash(ours) == hash(cls(**values))
    assert ours != dataclasses.replace(ours, api_port=1)
    assert ours != theirs  # another class: not equal, as between two dataclasses
    assert ours.__eq__(object()) is NotImplemented


def test_replace_and_frozen_as_a_dataclass() -> None:
    settings = Settings()
    changed = dataclasses.replace(settings, prefix="other")
    assert (changed.prefix, changed.api_port) == ("other", settings.api_port)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.prefix = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del settings.prefix
    assert Settings().nats_auth == NatsAuth()


@pytest.mark.parametrize(
    ("cls", "args", "kwargs"),
    [
        (Settings, ("var",), {}),
        (Settings, (), {"no_such_setting": 1}),
        (Located, (), {}),
        (Located, (), {"database_url": "postgresql://x/y"}),
    ],
)
def test_the_same_errors_as_generated(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(TypeError) as ours:
        cls(*args, **kwargs)
    with pytest.raises(TypeError) as theirs:
        _reference(cls)(*args, **kwargs)
    assert str(ours.value) == str(theirs.value)


def test_three_missing_are_listed_as_python_lists_them() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Three:
        a: int
        b: int
        c: int

    with pytest.raises(TypeError) as theirs:
        Three()  # type: ignore[call-arg]
    from noema.runtime.settings import _settings_class

    @_settings_class
    class Three:  # type: ignore[no-redef]
        a: int
        b: int
        c: int

    with pytest.raises(TypeError) as ours:
        Three()  # type: ignore[call-arg]
    assert str(ours.value) == str(theirs.value)
