"""One validation system for every input we read: typed dataclasses built from plain tables.

A field declares its allowed range or choices with :func:`spec`; :func:`build` makes the dataclass
from a TOML/JSON table, checking unknown keys, required keys, types (``bool``, ``int``, ``float``,
``str``, fixed and variadic tuples, optional values, nested dataclasses), finiteness and ranges, and
raises one error naming the source, the dotted field and what is allowed. Presets, run
configurations and sink options all go through it; :func:`to_plain` writes a dataclass back.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from rt_lidar.errors import ConfigError, FieldError

__all__ = ["FieldError", "build", "check_value", "spec", "to_plain"]

ErrorType = Callable[[str, str, str], Exception]
Special = Mapping[str, Callable[[Any, str, str], Any]]


def spec(
    default: Any = dataclasses.MISSING,
    lo: float | None = None,
    hi: float | None = None,
    unit: str = "",
    choices: tuple[str, ...] | None = None,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field carrying its allowed range (inclusive) or choices for :func:`build`."""
    meta = {"lo": lo, "hi": hi, "unit": unit, "choices": choices}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _fmt(x: Any) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else repr(x)


def _type_name(tp: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(tp, str(tp))


def _check_scalar(
    value: Any, tp: Any, meta: Mapping[str, Any], source: str, where: str, error: ErrorType
) -> Any:
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, (int, float)) and not isinstance(value, bool),
        str: isinstance(value, str),
    }.get(tp)
    if ok is None:
        raise TypeError(f"schema: unsupported field type {tp!r} at {where}")
    if not ok:
        raise error(source, where, f"must be {_type_name(tp)}, got {type(value).__name__} {value!r}")
    if tp is float:
        value = float(value)
        if not math.isfinite(value):
            raise error(source, where, f"must be finite, got {value!r}")
    lo, hi, unit, choices = (meta.get(k) for k in ("lo", "hi", "unit", "choices"))
    if choices is not None and value not in choices:
        raise error(source, where, f"must be one of {', '.join(choices)}; got {value!r}")
    if tp in (int, float) and lo is not None and hi is not None and not lo <= value <= hi:
        raise error(
            source,
            where,
            f"must be in [{_fmt(lo)}, {_fmt(hi)}]{' ' + unit if unit else ''}, got {_fmt(value)}",
        )
    return value


def check_value(
    value: Any, tp: Any, meta: Mapping[str, Any], source: str, where: str, error: ErrorType = FieldError
) -> Any:
    """``value`` checked against type hint ``tp`` and the field's ``meta`` (range, choices)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        tp = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(tp), typing.get_args(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return build(tp, value, source, where, error)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise error(source, where, f"must be an array, got {type(value).__name__} {value!r}")
        variadic = len(args) == 2 and args[1] is Ellipsis
        if not variadic and len(value) != len(args):
            raise error(source, where, f"must have {len(args)} elements, got {len(value)}")
        elems = [args[0]] * len(value) if variadic else list(args)
        return tuple(
            check_value(v, e, meta, source, f"{where}[{i}]", error)
            for i, (v, e) in enumerate(zip(value, elems, strict=True))
        )
    return _check_scalar(value, tp, meta, source, where, error)


def build(
    cls: type,
    table: Any,
    source: str,
    prefix: str = "",
    error: ErrorType = FieldError,
    special: Special | None = None,
) -> Any:
    """Build dataclass ``cls`` from a table, checking keys, types and ranges.

    ``special`` maps a field name to a builder ``(value, source, where) -> value`` for fields whose
    check is more than their type (a preset's beam table). Checks of the dataclass's own
    ``__post_init__`` that raise :class:`~rt_lidar.errors.ConfigError` are reported with the source.
    """
    if not isinstance(table, Mapping):
        raise error(source, prefix or "(top level)", f"must be a table, got {type(table).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in table:
        if key not in fields:
            where = f"{prefix}.{key}" if prefix else str(key)
            raise error(source, where, f"unknown key; allowed keys: {', '.join(fields)}")
    kwargs: dict[str, Any] = {}
    for name, fld in fields.items():
        where = f"{prefix}.{name}" if prefix else name
        if name not in table:
            if fld.default is dataclasses.MISSING and fld.default_factory is dataclasses.MISSING:
                raise error(source, where, "is required")
            continue
        if special and name in special:
            kwargs[name] = special[name](table[name], source, where)
        else:
            kwargs[name] = check_value(table[name], hints[name], fld.metadata, source, where, error)
    try:
        return cls(**kwargs)
    except FieldError:
        raise
    except (ConfigError, ValueError, TypeError) as exc:  # a __post_init__ cross-field check
        raise error(source, prefix or "(top level)", str(exc)) from exc


def to_plain(obj: Any) -> Any:
    """A dataclass (or nest of them, tuples, dicts) as plain JSON/TOML-ready values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_plain(v) for k, v in obj.items()}
    return obj
