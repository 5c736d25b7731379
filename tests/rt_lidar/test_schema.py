"""The one validation system (rt_lidar.schema): variants by kind, min_items, custom checks, same_as,
the validate hook, and configuration dataclasses that check themselves."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from rt_lidar.errors import ConfigError, FieldError
from rt_lidar.schema import Where, build, build_variant, check_fields, spec, to_plain


@dataclass(frozen=True)
class Circle:
    kind: str = "circle"
    r: float = spec(1.0, 0.0, 10.0, "m")


@dataclass(frozen=True)
class Path_:
    kind: str = "path"
    times: tuple[float, ...] = spec((), 0.0, 100.0, min_items=2)
    points: tuple[tuple[float, float], ...] = spec((), same_len_as="times")

    def validate(self, what: Where) -> None:
        if list(self.times) != sorted(self.times):
            raise what.fail("times", f"must increase, got {list(self.times)}")


def _short(v: str) -> str | None:
    return None if len(v) <= 4 else f"at most 4 letters, got {v!r}"


@dataclass(frozen=True)
class Top:
    name: str = spec("top", check=_short)
    shapes: tuple[Circle | Path_, ...] = spec((), min_items=1, items="[[shapes]] table")
    seeds: tuple[int, ...] = spec((0,), 0, 9, wrap=True, min_items=1)
    fog: tuple[float | Literal["none"], ...] = spec(("none",), 10.0, 1000.0, wrap=True)
    label: str = spec("car", choices=("car", "road"), key="class")
    copy: str = spec("top", same_as="name")


def _fail(table: dict[str, Any]) -> FieldError:
    with pytest.raises(FieldError) as err:
        build(Top, table, "t.toml")
    return err.value


def test_variants_are_chosen_by_kind_and_the_first_is_the_default() -> None:
    top = build(
        Top, {"shapes": [{"r": 2}, {"kind": "path", "times": [0, 1], "points": [[0, 0], [1, 1]]}]}, "t"
    )
    assert top.shapes == (Circle(r=2.0), Path_(times=(0.0, 1.0), points=((0.0, 0.0), (1.0, 1.0))))
    err = _fail({"shapes": [{"kind": "square"}]})
    assert (err.field, err.problem) == ("shapes[0].kind", "must be one of circle, path; got 'square'")
    err = _fail({"shapes": [{"kind": "circle", "times": [1]}]})
    assert err.field == "shapes[0].times" and "unknown key; allowed keys: kind, r" in err.problem
    with pytest.raises(FieldError, match=r"x: field 'a\.kind': must be one of circle"):
        build_variant({"circle": Circle}, {"kind": "path"}, "x", "a")


@pytest.mark.parametrize(
    ("table", "field", "words"),
    [
        ({}, "shapes", "needs at least one [[shapes]] table"),
        ({"shapes": []}, "shapes", "needs at least one [[shapes]] table"),
        ({"shapes": [{"kind": "path", "times": [1]}]}, "shapes[0].times", "must list at least 2 values"),
        (
            {"shapes": [{"kind": "path", "times": [0, 1]}]},
            "shapes[0].points",
            "one item for each of times (2)",
        ),
        (
            {"shapes": [{"kind": "path", "times": [2, 1], "points": [[0, 0], [0, 0]]}]},
            "shapes[0].times",
            "increase",
        ),
        ({"shapes": [{}], "name": "toolong"}, "name", "at most 4 letters, got 'toolong'"),
        ({"shapes": [{}], "seeds": [1, 10]}, "seeds[1]", "must be in [0, 9], got 10"),
        ({"shapes": [{}], "seeds": []}, "seeds", "must list at least one value"),
        ({"shapes": [{}], "fog": ["fog"]}, "fog[0]", "must be a number or 'none', got str 'fog'"),
        ({"shapes": [{}], "fog": [5]}, "fog[0]", "must be in [10, 1000], got 5"),
        ({"shapes": [{}], "class": "tree"}, "class", "must be one of car, road; got 'tree'"),
        ({"shapes": [{}], "label": "car"}, "label", "unknown key; allowed keys: name, shapes"),
        ({"shapes": [{}], "copy": "abc"}, "copy", "must equal name ('top'), got 'abc'"),
    ],
)
def test_errors_name_the_field(table: dict[str, Any], field: str, words: str) -> None:
    err = _fail(table)
    assert err.source == "t.toml" and err.field == field
    assert words in err.problem


def test_wrap_key_and_to_plain() -> None:
    top = build(Top, {"shapes": [{}], "seeds": 3, "fog": 150, "class": "road"}, "t")
    assert (top.seeds, top.fog, top.label) == ((3,), (150.0,), "road")
    assert to_plain(top)["class"] == "road"


@dataclass(frozen=True)
class Settings:
    rate: float = spec(1.0, 0.0, None, "Hz")
    mode: str | None = spec(None, choices=("a", "b"))

    def __post_init__(self) -> None:
        check_fields(self, "settings")


@dataclass(frozen=True)
class Limits:
    rate: float = spec(1.0, 0.0)

    def __post_init__(self) -> None:
        check_fields(self, "limits", lambda s, f, p: ValueError(f"{s}.{f}: {p}"))


def test_dataclasses_built_in_code_check_themselves() -> None:
    assert Settings(rate=2).rate == 2.0 and isinstance(Settings(rate=2).rate, float)
    with pytest.raises(ConfigError, match="settings: field 'rate': must be >= 0 Hz, got -1"):
        Settings(rate=-1)
    with pytest.raises(ConfigError, match="settings: field 'mode': must be one of a, b; got 'c'"):
        Settings(mode="c")
    with pytest.raises(ValueError, match=r"limits\.rate: must be >= 0") as err:
        Limits(rate=-1)
    assert not isinstance(err.value, ConfigError)  # settings only code sets: a bug, not user input


def test_a_checked_dataclass_inside_a_file_is_named_by_the_file() -> None:
    @dataclass(frozen=True)
    class Outer:
        settings: Settings = field(default_factory=Settings)

    with pytest.raises(FieldError, match=r"run\.json: field 'settings\.rate': must be >= 0 Hz"):
        build(Outer, {"settings": {"rate": -3}}, "run.json")


@dataclass(frozen=True)
class Named:
    tables: dict[str, Circle] = field(default_factory=dict)


def test_a_table_of_named_tables_checks_each_by_name() -> None:
    got = build(Named, {"tables": {"a": {"r": 1}, "b": {}}}, "n.toml")
    assert list(got.tables) == ["a", "b"] and got.tables["a"] == Circle(r=1.0)
    with pytest.raises(FieldError, match=r"n\.toml: field 'tables\.b\.r': must be in \[0, 10\] m, got 11"):
        build(Named, {"tables": {"a": {}, "b": {"r": 11}}}, "n.toml")
