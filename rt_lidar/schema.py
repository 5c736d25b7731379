"""One validation system for every input we read: typed dataclasses built from plain tables.

A field declares what it allows with :func:`spec`: a range or choices for its values, a custom
``check``, a least number of items, another field it must equal (``same_as``) or match in length
(``same_len_as``), the table key it is read from when that is not its name (``key="class"``).
:func:`build` makes the dataclass from a TOML/JSON table, checking unknown keys, required keys, types
(``bool``, ``int``, ``float``, ``str``, ``Literal``, fixed and variadic tuples, optional values, unions,
nested dataclasses and unions of them chosen by their ``kind`` key, see :func:`build_variant`),
finiteness and ranges, then calls the class's ``validate(self, what)`` hook (checks across fields,
raising ``what.fail(field, problem)``). It raises one error naming the source, the dotted field and
what is allowed. Presets, materials, rigs, sweep files, run configurations and sink options all go
through it; a configuration dataclass built in code checks itself with :func:`check_fields` from its
``__post_init__``. :func:`to_plain` writes a dataclass back.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import threading
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rt_lidar.errors import ConfigError, FieldError

__all__ = [
    "FieldError",
    "Where",
    "build",
    "build_variant",
    "check_fields",
    "check_value",
    "spec",
    "to_plain",
]

ErrorType = Callable[[str, str, str], Exception]
Special = Mapping[str, Callable[[Any, str, str], Any]]
Check = Callable[[Any], "str | None"]


def spec(
    default: Any = dataclasses.MISSING,
    lo: float | None = None,
    hi: float | None = None,
    unit: str = "",
    choices: tuple[str, ...] | None = None,
    default_factory: Any = dataclasses.MISSING,
    *,
    check: Check | None = None,
    min_items: int | None = None,
    items: str = "",
    same_as: str | None = None,
    same_len_as: str | None = None,
    key: str | None = None,
    wrap: bool = False,
) -> Any:
    """A dataclass field carrying what :func:`build` and :func:`check_fields` allow.

    ``lo`` / ``hi``: inclusive range of every number in the value (either may be left open);
    ``choices``: allowed strings; ``check``: called with every scalar of the value (after its type and
    range), returns a problem or None. ``min_items``: a variadic tuple needs at least that many items
    (``items`` names one in the message: ``"[[sensors]] table"``); ``wrap``: a single value stands for a
    list of one. ``same_as`` / ``same_len_as``: the name of another field this one must equal / have as
    many items as. ``key``: the table key when it is not the field's name (a Python keyword).
    """
    meta = {
        "lo": lo,
        "hi": hi,
        "unit": unit,
        "choices": choices,
        "check": check,
        "min_items": min_items,
        "items": items,
        "same_as": same_as,
        "same_len_as": same_len_as,
        "key": key,
        "wrap": wrap,
    }
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class Where:
    """Where a table is being checked, handed to a class's ``validate(self, what)`` hook: the source
    (file), the table's dotted path, the error type, and the caller's ``context`` (e.g. a base folder)."""

    source: str
    prefix: str = ""
    error: ErrorType = FieldError
    context: Any = None

    def path(self, name: str) -> str:
        """The dotted path of field ``name`` of this table."""
        return f"{self.prefix}.{name}" if self.prefix else name

    def fail(self, name: str, problem: str) -> Exception:
        """The error naming field ``name`` of this table (raise it)."""
        return self.error(self.source, self.path(name), problem)

    def fail_table(self, problem: str) -> Exception:
        """The error naming this table as a whole (raise it)."""
        return self.error(self.source, self.prefix or "(top level)", problem)


def _fmt(x: Any) -> str:
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x) if abs(x) < 10**12 else f"{x:g}"
    return f"{x:g}" if isinstance(x, float) else repr(x)


_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
_PLURALS = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    return _NAMES.get(tp, str(tp))


def _range_problem(value: float, lo: float | None, hi: float | None, unit: str) -> str | None:
    u = f" {unit}" if unit else ""
    if lo is not None and hi is not None and not lo <= value <= hi:
        return f"must be in [{_fmt(lo)}, {_fmt(hi)}]{u}, got {_fmt(value)}"
    if lo is not None and hi is None and not value >= lo:
        return f"must be >= {_fmt(lo)}{u}, got {_fmt(value)}"
    if hi is not None and lo is None and not value <= hi:
        return f"must be <= {_fmt(hi)}{u}, got {_fmt(value)}"
    return None


def _is_type(value: Any, tp: Any) -> bool:
    if typing.get_origin(tp) is typing.Literal:
        return value in typing.get_args(tp)
    return {  # numbers.Integral / Real: numpy's scalars too, for dataclasses built in code
        bool: isinstance(value, bool),
        int: isinstance(value, numbers.Integral) and not isinstance(value, bool),
        float: isinstance(value, numbers.Real) and not isinstance(value, bool),
        str: isinstance(value, str),
    }.get(tp, False)


def _check_scalar(
    value: Any, tp: Any, meta: Mapping[str, Any], source: str, where: str, error: ErrorType
) -> Any:
    if tp is Any:
        return value
    if tp not in _NAMES and typing.get_origin(tp) is not typing.Literal:
        raise TypeError(f"schema: unsupported field type {tp!r} at {where}")
    if not _is_type(value, tp):
        if typing.get_origin(tp) is typing.Literal:
            raise error(source, where, f"must be {_type_name(tp)}; got {value!r}")
        raise error(source, where, f"must be {_type_name(tp)}, got {type(value).__name__} {value!r}")
    if tp is int and type(value) is not int:
        value = int(value)
    if tp is float:
        value = float(value)
        if not math.isfinite(value):
            raise error(source, where, f"must be finite, got {value!r}")
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise error(source, where, f"must be one of {', '.join(choices)}; got {value!r}")
    if tp in (int, float):
        problem = _range_problem(value, meta.get("lo"), meta.get("hi"), meta.get("unit") or "")
        if problem:
            raise error(source, where, problem)
    check = meta.get("check")
    if check is not None:
        problem = check(value)
        if problem:
            raise error(source, where, problem)
    return value


def _kind_of(cls: type) -> str:
    """The ``kind`` a variant dataclass stands for: its ``kind`` field's default."""
    for f in dataclasses.fields(cls):
        if f.name == "kind" and isinstance(f.default, str):
            return f.default
    raise TypeError(f"schema: {cls.__name__} in a union needs a 'kind' field with a string default")


def _min_items_problem(n: int, meta: Mapping[str, Any]) -> str:
    items = meta.get("items")
    if items:
        return f"needs at least {'one' if n == 1 else n} {items}"
    return "must list at least one value" if n == 1 else f"must list at least {n} values"


def _check_union(
    value: Any,
    args: tuple[Any, ...],
    meta: Mapping[str, Any],
    source: str,
    where: str,
    error: ErrorType,
    context: Any,
) -> Any:
    if value is None and type(None) in args:
        return None
    alts = [a for a in args if a is not type(None)]
    if len(alts) == 1:
        return check_value(value, alts[0], meta, source, where, error, context)
    if all(dataclasses.is_dataclass(a) for a in alts):
        for a in alts:
            if isinstance(value, a):
                return value
        variants = {_kind_of(a): a for a in alts}
        return build_variant(variants, value, source, where, error, context=context)
    for a in alts:
        if _is_type(value, a) or (typing.get_origin(a) is tuple and isinstance(value, (list, tuple))):
            return check_value(value, a, meta, source, where, error, context)
    names = " or ".join(_type_name(a) for a in alts)
    raise error(source, where, f"must be {names}, got {type(value).__name__} {value!r}")


def check_value(
    value: Any,
    tp: Any,
    meta: Mapping[str, Any],
    source: str,
    where: str,
    error: ErrorType = FieldError,
    context: Any = None,
) -> Any:
    """``value`` checked against type hint ``tp`` and the field's ``meta`` (:func:`spec`'s options)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        return _check_union(value, args, meta, source, where, error, context)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if isinstance(value, tp):  # already built (and checked by its own __post_init__)
            return value
        return build(tp, value, source, where, error, context=context)
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise error(source, where, f"must be a table, got {type(value).__name__} {value!r}")
        n = meta.get("min_items")
        if n is not None and len(value) < n:
            raise error(source, where, _min_items_problem(n, meta))
        if len(args) != 2 or args[1] is Any:
            return value
        return {  # a table of NAME = value: each checked, named where.NAME
            str(k): check_value(v, args[1], meta, source, f"{where}.{k}", error, context)
            for k, v in value.items()
        }
    if origin is tuple:
        variadic = len(args) == 2 and args[1] is Ellipsis
        if variadic and meta.get("wrap") and not isinstance(value, (list, tuple)):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise error(source, where, f"must be an array, got {type(value).__name__} {value!r}")
        if not variadic and len(value) != len(args):
            problem = f"must have {len(args)} elements"
            if len(set(args)) == 1 and args[0] in _PLURALS:
                problem += f" (a list of {len(args)} {_PLURALS[args[0]]})"
            raise error(source, where, f"{problem}, got {len(value)}: {value!r}")
        n = meta.get("min_items")
        if variadic and n is not None and len(value) < n:
            raise error(source, where, _min_items_problem(n, meta))
        elems = [args[0]] * len(value) if variadic else list(args)
        return tuple(
            check_value(v, e, meta, source, f"{where}[{i}]", error, context)
            for i, (v, e) in enumerate(zip(value, elems, strict=True))
        )
    return _check_scalar(value, tp, meta, source, where, error)


def build_variant(
    variants: Mapping[str, type],
    table: Any,
    source: str,
    prefix: str = "",
    error: ErrorType = FieldError,
    key: str = "kind",
    default: str | None = None,
    context: Any = None,
) -> Any:
    """Build the dataclass ``variants[table[key]]`` from ``table`` (each variant has its own fields; the
    key itself is a field of every variant). Without the key: ``default``, else the first variant."""
    what = Where(source, prefix, error, context)
    if not isinstance(table, Mapping):
        raise error(source, prefix or "(top level)", f"must be a table, got {type(table).__name__}")
    kind = table.get(key, default if default is not None else next(iter(variants)))
    if not isinstance(kind, str) or kind not in variants:
        raise what.fail(key, f"must be one of {', '.join(variants)}; got {kind!r}")
    return build(variants[kind], table, source, prefix, error, context=context)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """The resolved type hints of a dataclass (once a class: they do not change)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


_building = threading.local()
"""The class :func:`build` is constructing: its ``__post_init__`` leaves the checks to ``build``."""


def _cross_checks(cls: type, values: Mapping[str, Any], what: Where) -> None:
    """``same_as`` and ``same_len_as`` of every field of ``cls`` (``values``: every field's value)."""
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        key = f.metadata.get("key") or f.name
        other = f.metadata.get("same_as")
        if other and values[f.name] != values.get(other):
            raise what.fail(key, f"must equal {other} ({values.get(other)!r}), got {values[f.name]!r}")
        other = f.metadata.get("same_len_as")
        if other and len(values[f.name] or ()) != len(values.get(other) or ()):
            raise what.fail(
                key,
                f"must have one item for each of {other} ({len(values.get(other) or ())}), "
                f"got {len(values[f.name] or ())}",
            )


def build(
    cls: type,
    table: Any,
    source: str,
    prefix: str = "",
    error: ErrorType = FieldError,
    special: Special | None = None,
    context: Any = None,
) -> Any:
    """Build dataclass ``cls`` from a table, checking keys, types, ranges, ``same_as`` and the class's
    ``validate(self, what)`` hook.

    ``special`` maps a field name to a builder ``(value, source, where) -> value`` for fields whose
    check is more than their type (a preset's beam table). ``context`` reaches every ``validate`` hook
    (as ``what.context``). A :class:`~rt_lidar.errors.ConfigError` of the class's own ``__post_init__``
    is reported with the source.
    """
    what = Where(source, prefix, error, context)
    if not isinstance(table, Mapping):
        raise error(source, prefix or "(top level)", f"must be a table, got {type(table).__name__}")
    hints = _hints(cls)
    fields = {(f.metadata.get("key") or f.name): f for f in dataclasses.fields(cls) if f.init}
    for key in table:
        if key not in fields:
            raise what.fail(str(key), f"unknown key; allowed keys: {', '.join(fields)}")
    kwargs: dict[str, Any] = {}
    values: dict[str, Any] = {}
    for key, fld in fields.items():
        where = what.path(key)
        if key not in table:
            if fld.default is dataclasses.MISSING and fld.default_factory is dataclasses.MISSING:
                raise error(source, where, "is required")
            factory: Any = fld.default_factory
            value = fld.default if fld.default is not dataclasses.MISSING else factory()
            n = fld.metadata.get("min_items")
            if n is not None and value is not None and len(value) < n:
                raise error(source, where, _min_items_problem(n, fld.metadata))
            values[fld.name] = value
            continue
        if special and key in special:
            kwargs[fld.name] = special[key](table[key], source, where)
        else:
            kwargs[fld.name] = check_value(
                table[key], hints[fld.name], fld.metadata, source, where, error, context
            )
        values[fld.name] = kwargs[fld.name]
    _cross_checks(cls, values, what)
    outer = getattr(_building, "cls", None)
    _building.cls = cls
    try:
        obj = cls(**kwargs)
    except FieldError as exc:  # a check of __post_init__ naming its own label: name the file
        if exc.source == source:
            raise
        raise error(source, what.path(exc.field), exc.problem) from exc
    except ConfigError as exc:  # a __post_init__ cross-field check
        raise error(source, prefix or "(top level)", str(exc)) from exc
    finally:
        _building.cls = outer
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate(what)
    return obj


def check_fields(obj: Any, label: str, error: ErrorType = FieldError) -> None:
    """Check a dataclass built in code (call it from ``__post_init__``) as :func:`build` checks a table:
    every field's type, range, choices and ``check``, ``same_as``, and the ``validate`` hook; numbers
    are stored as ``float`` where the field says so and lists as tuples. Errors name ``label`` and the
    field (``error`` picks their type: :class:`FieldError`, a ``ConfigError``, for user input; a plain
    ``ValueError`` for settings only code sets). Inside :func:`build` this does nothing (``build``
    checks with the file's name)."""
    cls = type(obj)
    if getattr(_building, "cls", None) is cls:
        return
    what = Where(label, "", error)
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        value = getattr(obj, f.name)
        if f.init and not f.name.startswith("_"):
            checked = check_value(
                value, hints[f.name], f.metadata, label, f.metadata.get("key") or f.name, error
            )
            if checked is not value and type(checked) is not type(value):  # 3 -> 3.0, [..] -> (..)
                object.__setattr__(obj, f.name, checked)
                value = checked
        values[f.name] = value
    _cross_checks(cls, values, what)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate(what)


def to_plain(obj: Any) -> Any:
    """A dataclass (or nest of them, tuples, dicts) as plain JSON/TOML-ready values (fields read from
    another key, :func:`spec`'s ``key``, are written under it)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            (f.metadata.get("key") or f.name): to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)
        }
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_plain(v) for k, v in obj.items()}
    return obj
