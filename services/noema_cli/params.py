"""Command-line values converted without pydantic.

typer 0.29 converts every value given on the command line through a pydantic ``TypeAdapter``,
built on first use: a command that takes any option (a search: its query, mode, limit) imports
pydantic and builds one adapter per value, about 0.05 s of CPU before the command runs. The values
``noemactl`` takes are plain (text, true/false, paths, integers and floats with an optional range,
lists of them, or values of an option's own parser), so they are converted here, checked the same
way (a range is inclusive, or clamped when the option says so) and refused with exit 2 and a
message naming the option. Anything else (a date without a parser, a choice of a ``Literal``) still
goes through typer's own conversion.

:func:`install` wires this in once, before the command tree parses anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer import core as typer_core
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_path

from noema.records import dataclass

__all__ = ["install"]

_NUMBERS: dict[Any, str] = {int: "an integer", float: "a number"}
_PLAIN = (str, bool, Path, int, float)


@dataclass(frozen=True)
class PlainParam(RuntimeParam):
    """Converts a plain value (or each of a list of them) the way typer's adapter would."""

    item: Any

    def _coerce_value(self, value: Any, param: Any, ctx: Context) -> Any:
        if self.item is not self.annotation:  # a list of them
            values = value if isinstance(value, (list, tuple)) else [value]
            return [self._one(v, param, ctx) for v in values]
        return self._one(value, param, ctx)

    def _one(self, value: Any, param: Any, ctx: Context) -> Any:
        info = self.parameter_info
        if info.parser is not None:
            try:
                return info.parser(value)
            except ValueError as exc:  # a BadParameter of the parser's own goes as it is
                raise BadParameter(str(exc), ctx=ctx, param=param) from None
        if self.item is str:
            return value if isinstance(value, str) else str(value)
        if self.item is bool:
            return _boolean(value, param, ctx)
        if self.item is Path:
            return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
        return _number(self.item, value, info.min, info.max, bool(info.clamp), param, ctx)


def _boolean(value: Any, param: Any, ctx: Context) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("", "0", "false", "f", "no", "n", "off"):
        return False
    if text in ("1", "true", "t", "yes", "y", "on"):
        return True
    raise BadParameter(f"{value!r} is not true or false.", ctx=ctx, param=param)


def _number(kind: type[Any], value: Any, low: Any, high: Any, clamp: bool, param: Any, ctx: Context) -> Any:
    try:
        number = kind(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise BadParameter(f"{value!r} is not {_NUMBERS[kind]}.", ctx=ctx, param=param) from None
    if kind is float and number != number:  # NaN is no value on a command line
        raise BadParameter(f"{value!r} is not {_NUMBERS[kind]}.", ctx=ctx, param=param)
    if low is not None and number < low:
        if clamp:
            return kind(low)
        raise BadParameter(f"{value} is below the minimum, {low}.", ctx=ctx, param=param)
    if high is not None and number > high:
        if clamp:
            return kind(high)
        raise BadParameter(f"{value} is above the maximum, {high}.", ctx=ctx, param=param)
    return number


def _item(descriptor: TypeDescriptor) -> Any:
    """The plain type a descriptor converts to (of each item, for a list), or None."""
    info = descriptor.parameter_info
    if getattr(info, "click_type", None) is not None or descriptor.file_annotation is not None:
        return None
    annotation = descriptor.annotation
    item = (
        annotation.__args__[0]
        if descriptor.is_list and len(getattr(annotation, "__args__", ())) == 1
        else annotation
    )
    if info.parser is not None:
        return item  # the parser converts each value (typer's adapter only calls it too)
    if descriptor.is_choice or item not in _PLAIN:
        return None
    return item


def _build(descriptor: TypeDescriptor) -> RuntimeParam:
    item = _item(descriptor)
    if item is None:
        return build_runtime_param(descriptor)
    return PlainParam(descriptor.parameter_info, descriptor.annotation, item)


def install() -> None:
    """Convert plain command-line values here from now on; others as typer does (typer's
    parameters build their converter through ``typer.core.build_runtime_param``)."""
    typer_core.build_runtime_param = _build  # type: ignore[attr-defined]  # imported, not exported
