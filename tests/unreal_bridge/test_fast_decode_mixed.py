"""decode_array equals msgpack's reference decoder on randomised mixed-width arrays (msgpack-c forms)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from rt_lidar.unreal_bridge import fast_decode
from rt_lidar.unreal_bridge.errors import WireFormatError

# One value per msgpack encoding: fixints, 0xcc..0xcf, 0xd0..0xd3 (packb writes the smallest form).
_INTS = [0, 5, 127, -1, -32, 128, 204, 208, 255, 256, 65535, 65536, 2**32, -33, -128, -129, -32768, -32769]
_INTS += [-(2**31) - 1]


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def narrow_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs against the compiled narrow-int reader and against its NumPy twin."""
    if request.param == "numpy":
        monkeypatch.setattr(fast_decode, "_compiled_narrow_ints", None)
    return str(request.param)


def test_compiled_reader_is_built() -> None:
    # make test installs the package with its optional extension; a silent fallback would hide a 5x loss
    from rt_lidar.unreal_bridge import _narrow_ints  # noqa: F401


def _random_case(rng: np.random.Generator, pool: list[int]) -> list[int]:
    n = int(rng.choice([0, 1, 2, 15, 16, int(rng.integers(0, 300))]))
    return [int(v) for v in rng.choice(pool, n)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("pool", ["segmentation", "every_int"])
def test_mixed_int_arrays_equal_msgpack(seed: int, pool: str) -> None:
    rng = np.random.default_rng(seed)
    values_pool = [-1, *range(0, 256)] if pool == "segmentation" else _INTS
    for _ in range(40):
        values = _random_case(rng, values_pool)
        data = msgpack.packb(values) + b"\xa1x"  # a following object must not be read into the array
        ref = msgpack.unpackb(data[: len(data) - 2])
        arr, end = fast_decode.decode_array(data, 0, np.int64)
        assert end == len(data) - 2
        assert arr.dtype == np.int64
        assert arr.tolist() == ref


@pytest.mark.parametrize("seed", range(4))
def test_mixed_float_arrays_equal_msgpack(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(30):
        n = int(rng.integers(0, 200))
        vals = rng.normal(size=n)
        items: list[float] = [float(np.float32(v)) if rng.random() < 0.5 else float(v) for v in vals]
        single = [bool(rng.random() < 0.5) for _ in items]
        packer = msgpack.Packer(use_single_float=False)
        body = b"".join(
            msgpack.packb(v, use_single_float=True) if s else packer.pack(v)
            for v, s in zip(items, single, strict=True)
        )
        data = fast_decode.array_header(n) + body
        arr, end = fast_decode.decode_array(data, 0, np.float64)
        assert end == len(data)
        assert arr.tolist() == msgpack.unpackb(data)


@pytest.mark.parametrize("seed", range(3))
def test_every_truncation_of_a_mixed_array_is_a_clean_error(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    values = [int(v) for v in rng.choice([-1, *range(0, 256)], 40)]
    data = msgpack.packb(values)
    for k in range(len(data)):
        with pytest.raises(fast_decode.Truncated):
            fast_decode.decode_array(data[:k], 0, np.int32)


def test_big_realistic_segmentation_is_exact() -> None:
    rng = np.random.default_rng(7)
    values = rng.integers(-1, 256, 100_000)
    data = msgpack.packb(values.tolist())
    arr, end = fast_decode.decode_array(data, 0, np.int32)
    assert end == len(data)
    np.testing.assert_array_equal(arr, values)


def test_stray_type_byte_in_a_narrow_array_falls_back_correctly() -> None:
    # 0xcc 0xcd is the uint8 205, not a uint16 header; a lone 0xc1 (never used) is refused
    data = bytes([0x93, 0xCC, 0xCD, 0x05, 0xD0, 0x80])
    assert fast_decode.decode_array(data, 0, np.int32)[0].tolist() == msgpack.unpackb(data)
    with pytest.raises(WireFormatError):
        fast_decode.decode_array(bytes([0x92, 0x05, 0xC1]), 0, np.int32)


def test_truncated_narrow_array_asks_for_at_least_a_byte_per_missing_element() -> None:
    data = msgpack.packb([1, 200, -1, 204, 7])  # 0x95 01 cc c8 ff cc cc 07
    with pytest.raises(fast_decode.Truncated) as err:
        fast_decode.decode_array(data[:7], 0, np.int32)  # four elements complete, the fifth is missing
    assert err.value.least == 8


def test_narrow_array_followed_by_other_data_stops_at_its_end() -> None:
    data = msgpack.packb([[255, -1, 3], 1.5])
    arr, end = fast_decode.decode_array(data, 1, np.int16)
    assert arr.tolist() == [255, -1, 3] and data[end] == 0xCB


def test_the_16_byte_path_reads_what_the_byte_walk_reads(narrow_reader: str) -> None:
    """The compiled reader's SSSE3 path (x86-64), and the NumPy twin, against msgpack: ids of 204, 208
    and -48 next to type bytes (the chunks read element by element), chunks ending on a type byte,
    every truncation, and a byte of another type at every place."""
    import platform

    from rt_lidar.unreal_bridge import _narrow_ints

    if narrow_reader == "compiled" and platform.machine() in ("x86_64", "AMD64"):
        assert _narrow_ints.simd_used()  # every x86-64 CI machine has SSSE3
    rng = np.random.default_rng(21)
    pools = ([204, 208, -48, 5, -1, 255, 128, 0], [-1, *range(256)], list(range(128)), [200, 201])
    for pool in pools:
        for n in (16, 17, 31, 32, 33, 100, 1000, 5000):
            values = [int(v) for v in rng.choice(pool, n)]
            data = msgpack.packb(values)
            arr, end = fast_decode.decode_array(data, 0, np.int32)
            assert end == len(data) and arr.tolist() == values
    values = [int(v) for v in rng.choice(pools[0], 120)]
    data = msgpack.packb(values)
    for k in range(len(data)):
        with pytest.raises(fast_decode.Truncated) as cut:
            fast_decode.decode_array(data[:k], 0, np.int32)
        assert k < cut.value.least <= len(data)  # asks for more, never for more than the whole array
    for k in range(3, len(data)):
        bad = (
            data[:k] + b"\xca" + data[k + 1 :]
        )  # a float32 type byte where an element starts or a payload was
        try:
            want = msgpack.unpackb(bad, strict_map_key=False)
        except Exception:
            want = None
        try:
            got = fast_decode.decode_array(bad, 0, np.float64)[0].tolist()
        except (WireFormatError, fast_decode.Truncated):
            got = None
        if want is not None and got is not None:
            assert got == want
