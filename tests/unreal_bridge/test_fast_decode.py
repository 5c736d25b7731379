"""fast_decode equals msgpack's own decoder, on uniform and mixed arrays and whole responses."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from rt_lidar.unreal_bridge import fast_decode
from rt_lidar.unreal_bridge.errors import WireFormatError

RNG = np.random.default_rng(7)
F32 = RNG.normal(size=3000).astype(np.float32)


def _packb(obj: object, single: bool = True) -> bytes:
    return msgpack.packb(obj, use_single_float=single, use_bin_type=True)


CASES = {
    "float32": (_packb(F32.tolist()), np.float32),
    "float64": (_packb(F32.tolist(), single=False), np.float32),
    "float32_float64_mixed": (
        b"\x93" + b"".join(msgpack.packb(v, use_single_float=i != 1) for i, v in enumerate([1.5, 2.5, 3.25])),
        np.float32,
    ),
    "fixint": (_packb(list(range(100))), np.int32),
    "fixint_negative": (_packb([-32, -1, 0, 5, 127] * 20), np.int32),
    "mixed_int_widths": (
        _packb([0, 127, 128, 255, 256, 70000, -1, -33, -200, -70000, 2**31 - 1] * 30),
        np.int32,
    ),
    "uint8_uniform": (_packb(list(range(128, 256))), np.int32),
    "int32_uniform": (
        b"\xdc\x00\x03" + b"".join(b"\xd2" + int(v).to_bytes(4, "big", signed=True) for v in (-5, 0, 9)),
        np.int32,
    ),
    "ints_as_float": (_packb([1, 2, 3, 200]), np.float32),
    "floats_and_ints": (_packb([1.5, 2, -3, 4.25]), np.float32),
    "empty": (_packb([]), np.float32),
    "fixarray": (_packb([1.0, 2.0]), np.float32),
    "array32": (_packb([0.5] * 70000), np.float32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_decode_array_equals_msgpack(name: str) -> None:
    data, dtype = CASES[name]
    expected = np.asarray(msgpack.unpackb(data), dtype=dtype)
    got, end = fast_decode.decode_array(data, 0, dtype)
    assert end == len(data)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, expected)


def test_float32_array_is_exact_and_nan_safe() -> None:
    values = np.array([0.1, -0.0, np.inf, -np.inf, np.nan, 3.4e38, 1e-45], dtype=np.float32)
    data = fast_decode.pack_float32_array(values)
    assert data[0] == 0x97 and data[1] == 0xCA and len(data) == 1 + 5 * len(values)
    got, _ = fast_decode.decode_array(data, 0, np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), values.view(np.uint32))


def test_encoders_are_what_msgpack_reads() -> None:
    for n in (0, 15, 16, 65535, 65536):
        f = np.linspace(-1, 1, n, dtype=np.float32)
        i = np.arange(-n // 2, n - n // 2, dtype=np.int32) * 1000
        assert msgpack.unpackb(fast_decode.pack_float32_array(f)) == f.tolist()
        assert msgpack.unpackb(fast_decode.pack_int32_array(i)) == i.tolist()


def test_decode_whole_response_with_named_arrays() -> None:
    cloud = F32[:300]
    result = {
        "time_stamp": 2**63 - 5,
        "point_cloud": cloud.tolist(),
        "pose": {"position": {"x_val": 1.5}},
        "segmentation": list(range(100)),
        "name": "x" * 40,
        "blob": b"\x00\x01",
        "neg": -70000,
        "flags": [True, False, None],
        "big": [1] * 40,
    }
    data = msgpack.packb([1, 7, None, result], use_single_float=True)
    plain = msgpack.unpackb(data)
    got, end = fast_decode.decode(data, 0, {"point_cloud": np.float32, "segmentation": np.int32})
    assert end == len(data)
    res = got[3]
    np.testing.assert_array_equal(res.pop("point_cloud"), np.asarray(plain[3].pop("point_cloud"), np.float32))
    np.testing.assert_array_equal(res.pop("segmentation"), plain[3].pop("segmentation"))
    assert got[:3] == plain[:3] and res == plain[3]
    # without named arrays it is msgpack's decode exactly
    assert fast_decode.decode(data)[0] == msgpack.unpackb(data)


@pytest.mark.parametrize("data", [b"", b"\x93\x01", b"\xdd\x00\x00\x00\x09\xca", b"\xc1", b"\xa3ab"])
def test_truncated_or_invalid_input_is_refused(data: bytes) -> None:
    with pytest.raises(WireFormatError):
        fast_decode.decode(data, 0, {})


def test_non_numeric_array_is_refused() -> None:
    with pytest.raises(WireFormatError):
        fast_decode.decode_array(_packb(["a", "b"]), 0, np.float32)


def test_every_prefix_of_a_message_is_truncated_never_wrong() -> None:
    body = {"a": [1.5, 2, "x"] * 30, "b": list(range(300)), "c": F32[:50].tolist()}
    msg = msgpack.packb([1, 3, None, body], use_single_float=True)
    for cut in range(0, len(msg), 7):
        with pytest.raises(fast_decode.Truncated):
            fast_decode.decode(msg[:cut], 0, {"c": np.float32, "b": np.int32})
    assert fast_decode.decode(msg, 0)[0] == msgpack.unpackb(msg)
