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
        ("flags", "|u1", 31),
        ("segment", "<u4", 32),
    ]
    assert POINT_DTYPE.itemsize == 36


def test_flags_are_distinct_bits():
    values = [int(f) for f in PointFlag if f]
    assert all(v & (v - 1) == 0 for v in values)
    assert len(set(values)) == len(values)
    assert empty_points(3)["flags"].dtype == np.uint8
