import numpy as np

from rt_lidar.points import POINT_DTYPE, POINT_FIELDS, PointFlag, empty_points


def test_point_dtype_is_pinned():
    assert [(n, POINT_DTYPE.fields[n][0].str, POINT_DTYPE.fields[n][1]) for n in POINT_FIELDS] == [
        ("x", "<f4", 0),
        ("y", "<f4", 4),
        ("z", "<f4", 8),
        ("intensity", "<f4", 12),
        ("reflectivity", "<f4", 16),
        ("ring", "<u2", 20),
        ("t", "<i8", 22),
        ("return_id", "|u1", 30),
        ("flags", "<u2", 31),
        ("segment", "<u4", 33),
    ]
    assert POINT_DTYPE.itemsize == 37


def test_flags_are_distinct_bits():
    values = [int(f) for f in PointFlag if f]
    assert all(v & (v - 1) == 0 for v in values)
    assert len(set(values)) == len(values)
    assert empty_points(3)["flags"].dtype == np.uint16
    assert {int(f) for f in PointFlag if f.name.startswith("FAULT_")} == {1 << b for b in range(8, 16)}


def test_concat_points_keeps_every_field():
    from rt_lidar.points import concat_points

    a, b = empty_points(3), empty_points(2)
    a["t"] = [1, 2, 3]
    b["segment"] = [7, 8]
    b["x"] = [0.5, -1.5]
    c = concat_points([a, b])
    assert c.dtype == POINT_DTYPE and c.size == 5
    assert c["t"].tolist() == [1, 2, 3, 0, 0]
    assert c["segment"].tolist() == [0, 0, 0, 7, 8]
    assert c["x"].tolist() == [0, 0, 0, 0.5, -1.5]
    assert concat_points([]).size == 0
