"""The PCD writer's field copies in blocks (``copy_same_fields``) and its intensity conversion in float32 give
the bytes of the field-by-field copies and the float64 conversion they replaced: on the point type with
and without extras, on padded, reordered and strided records, and on odd intensities (NaN, inf,
negative, halves, beyond the type's range)."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.points import POINT_DTYPE
from rt_lidar.sinks.field_copy import copy_same_fields
from rt_lidar.sinks.pcd import with_extras, with_intensity_type


def _points(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pts = np.zeros(n, POINT_DTYPE)
    raw = rng.integers(0, 256, n * POINT_DTYPE.itemsize, dtype=np.uint8)
    pts.view(np.uint8)[:] = raw  # every byte of every field random (NaNs and infs among the floats)
    inten = rng.uniform(-10, 70_000, n).astype(np.float32)
    inten[::5] = np.round(inten[::5]) + 0.5  # halves: rint's ties to even
    inten[1::17] = np.nan
    inten[2::19] = np.inf
    inten[3::23] = -np.inf
    inten[4::29] = 5e9
    pts["intensity"] = inten
    return pts


def _field_by_field(src: np.ndarray, out: np.ndarray, names: list[str]) -> None:
    for n in names:
        out[n] = src[n]


def _reference_intensity(points: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """with_intensity_type as it was: every field copied on its own, the intensity through float64."""
    names = points.dtype.names or ()
    assert points.dtype.fields is not None
    fields = [(n, dtype if n == "intensity" else points.dtype.fields[n][0]) for n in names]
    out = np.empty(points.shape, np.dtype(fields))
    _field_by_field(points, out, [n for n in names if n != "intensity"])
    values = np.nan_to_num(points["intensity"].astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    if dtype.kind == "u":
        values = np.clip(np.rint(values), 0, np.iinfo(dtype).max)
    out["intensity"] = values.astype(dtype)
    return out


@pytest.mark.parametrize("kind", [np.uint8, np.uint16, np.uint32])
def test_intensity_types_are_the_float64_bytes(kind: type) -> None:
    pts = _points(20_000, seed=int(np.dtype(kind).itemsize))
    assert with_intensity_type(pts, np.dtype(np.float32)) is pts
    got, want = with_intensity_type(pts, np.dtype(kind)), _reference_intensity(pts, np.dtype(kind))
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_extras_are_the_field_by_field_bytes() -> None:
    pts = _points(5_000, seed=7)
    extras = {"epw_ns": np.arange(5_000, dtype=np.float32), "ambient_w": np.ones(5_000, np.float64)}
    got = with_extras(pts, extras)
    want = np.empty(pts.shape, got.dtype)
    _field_by_field(pts, want, list(pts.dtype.names or ()))
    for k, v in extras.items():
        want[k] = v
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize(
    "out_fields",
    [
        [("a", "<f4"), ("b", "<u2"), ("c", "<i8"), ("d", "u1")],  # packed, the same order
        [("d", "u1"), ("c", "<i8"), ("b", "<u2"), ("a", "<f4")],  # reordered
        [("a", "<f4"), ("b", "<u4"), ("c", "<i8"), ("d", "u1")],  # b of another type
    ],
)
@pytest.mark.parametrize("aligned", [False, True])
def test_blocks_of_any_layout_are_the_field_copies(out_fields: list[tuple[str, str]], aligned: bool) -> None:
    src_dt = np.dtype([("a", "<f4"), ("b", "<u2"), ("c", "<i8"), ("d", "u1")], align=aligned)
    rng = np.random.default_rng(1)
    src = np.zeros(3_000, src_dt)
    src.view(np.uint8)[:] = rng.integers(0, 256, src.nbytes, dtype=np.uint8)
    out_dt = np.dtype(out_fields, align=not aligned)
    names = ["a", "b", "c", "d"]
    got, want = np.zeros(3_000, out_dt), np.zeros(3_000, out_dt)
    copy_same_fields(got, src, list(names))
    _field_by_field(src, want, names)
    assert got.tobytes() == want.tobytes()
    got2, want2 = np.zeros(1_500, out_dt), np.zeros(1_500, out_dt)  # a strided source: field by field
    copy_same_fields(got2, src[::2], list(names[:3]))
    _field_by_field(src[::2], want2, names[:3])
    assert got2.tobytes() == want2.tobytes()


@pytest.mark.parametrize("kind", [np.uint8, np.uint16])
def test_compiled_intensity_is_the_numpy_lines_bytes(kind: type, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled conversion (``intensity_uint_compiled``) against the NumPy lines it replaces, on the
    odd values of ``_points`` and at each edge: -0, the smallest subnormals, halves at 0, at the type's
    top and just past it, the largest float32."""
    from rt_lidar.sinks import field_copy

    if field_copy._c is None:
        pytest.skip("the compiled field copy was not built")
    pts = _points(20_000, seed=11)
    top = float(np.iinfo(kind).max)
    edges = [-0.0, 1e-45, -1e-45, 0.5, 1.5, 2.5, top - 0.5, top + 0.5, top + 1.0, 3.4e38, -3.4e38]
    pts["intensity"][: len(edges)] = np.asarray(edges, np.float32)
    monkeypatch.setattr(field_copy, "enabled", True)  # on, whatever RT_LIDAR_NO_TWINS says
    got = with_intensity_type(pts, np.dtype(kind))
    out = np.empty(pts.shape, got.dtype)
    assert field_copy.intensity_uint_compiled(out, pts, [])  # the intensity alone
    assert out["intensity"].tobytes() == got["intensity"].tobytes()
    wide = np.empty(pts.shape, np.dtype([(n, "<u4" if n == "intensity" else t) for n, t in got.dtype.descr]))
    assert not field_copy.intensity_uint_compiled(wide, pts, [])  # uint32: the NumPy lines (float64)
    monkeypatch.setattr(field_copy, "enabled", False)
    want = with_intensity_type(pts, np.dtype(kind))
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
