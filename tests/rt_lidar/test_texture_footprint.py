"""The road texture averaged over each pulse's footprint, with patches (docs/realism.md change 46): the
aggregate's shot-to-shot spread shrinks with the footprint's area as a mean of that many cells does,
footprints that overlap read alike, the patches are smooth over metres with their own spread, and the
factor is the same bytes on every backend present (NumPy, CuPy)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from rt_lidar.kernels.texture import texture_factor
from rt_lidar.kernels.xp import cupy_available
from rt_lidar.physics.texture import GRAZING_COS_MIN, footprint_along_m, footprint_area_m2, footprint_beam
from rt_lidar.sensor.presets import load_preset

BACKENDS = ["numpy"] + (["cupy"] if cupy_available() else [])
CELL = 0.03
SIGMA = 0.3


@pytest.fixture(params=BACKENDS)
def xp(request: pytest.FixtureRequest) -> Any:
    if request.param == "cupy":
        import cupy

        return cupy
    return np


def _host(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a)


def _factor(xp: Any, pts: np.ndarray, area: float | None, patch: tuple[float, float] | None = None,
            sigma: float = SIGMA) -> np.ndarray:  # fmt: skip
    n = len(pts)
    args = [
        xp.asarray(pts),
        xp.full(n, 11, dtype=xp.uint64),
        xp.full(n, CELL),
        xp.full(n, sigma, dtype=xp.float32),
        None if area is None else xp.full(n, area),
        None if patch is None else xp.full(n, patch[0]),
        None if patch is None else xp.full(n, patch[1], dtype=xp.float32),
    ]
    f = _host(texture_factor(*args))
    if xp is not np:  # the device's factor is the host's, byte for byte
        host = texture_factor(*[None if a is None else _host(a) for a in args])
        assert f.tobytes() == host.tobytes()
    return f


def _road(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.c_[rng.uniform(-200, 200, (n, 2)), np.zeros(n)]


def test_the_aggregate_spread_shrinks_as_a_mean_of_the_cells_under_the_footprint(xp: Any) -> None:
    pts = _road(40_000)
    spreads = []
    for cells in (0.0, 1.0, 4.0, 16.0, 64.0):  # footprint area in cells
        f = _factor(xp, pts, cells * CELL * CELL)
        assert f.dtype == np.float32
        assert float(np.mean(f)) == pytest.approx(1.0, abs=0.01)  # mean 1 at every footprint
        want = SIGMA / np.sqrt(max(cells, 1.0))  # the variance of a mean of N cells: sigma^2 / N
        spreads.append(float(np.std(np.log(f))))
        assert spreads[-1] == pytest.approx(want, rel=0.05)
    assert all(a > b for a, b in itertools.pairwise(spreads[1:]))
    # no footprint is the single-cell texture of change 21, bit for bit
    assert _factor(xp, pts, 0.0).tobytes() == _factor(xp, pts, None).tobytes()


def test_overlapping_footprints_read_alike_and_a_point_s_cells_do_not(xp: Any) -> None:
    # neighbouring shots of a ring on the road at ~10 m, 3.5 cm apart
    x = np.arange(20_000) * 0.035
    pts = np.c_[x, np.full(x.size, 3.3), np.zeros(x.size)]
    n = x.size

    def lag1(across: float | None) -> float:
        if across is None:
            f = _factor(xp, pts, None)
        else:  # a footprint `across` wide and 0.25 m long (the grazing road)
            args = [xp.asarray(pts), xp.full(n, 11, dtype=xp.uint64), xp.full(n, CELL), xp.full(n, SIGMA)]
            area, along = xp.full(n, across * 0.25), xp.full(n, 0.25)
            f = _host(texture_factor(*args, area, None, None, along))
        g = np.log(f)
        return float(np.corrcoef(g[:-1], g[1:])[0, 1])

    assert abs(lag1(None)) < 0.05  # 3 cm cells: neighbours independent
    # a footprint narrower than the shots' spacing across (3.1 cm: the HDL-64E's at 10 m) does not
    # overlap its neighbour's: independent, however long it is along the road
    assert abs(lag1(0.031)) < 0.05
    # 13 cm across: a 12 cm cube, shared by neighbours 3.5 cm apart 1 - 3.5 / 12 = 0.71 of the time
    assert lag1(0.13) == pytest.approx(0.71, abs=0.08)


def test_patches_are_smooth_over_metres_with_their_own_spread(xp: Any) -> None:
    pts = _road(40_000, seed=1)
    f = _factor(xp, pts, 0.0, patch=(1.0, 0.3), sigma=0.0)  # patches alone
    assert float(np.std(np.log(f))) == pytest.approx(0.3, rel=0.08)
    assert float(np.mean(f)) == pytest.approx(1.0, abs=0.02)
    near = _factor(xp, pts + np.array([0.05, 0.0, 0.0]), 0.0, patch=(1.0, 0.3), sigma=0.0)
    far = _factor(xp, pts + np.array([5.0, 0.0, 0.0]), 0.0, patch=(1.0, 0.3), sigma=0.0)
    assert float(np.corrcoef(np.log(f), np.log(near))[0, 1]) > 0.95  # one patch under both
    assert abs(float(np.corrcoef(np.log(f), np.log(far))[0, 1])) < 0.05  # five lattice cells away
    both = _factor(xp, pts, 0.0, patch=(1.0, 0.3))
    assert float(np.std(np.log(both))) == pytest.approx(np.hypot(0.3, SIGMA), rel=0.08)  # logs add


def test_the_footprint_grows_with_range_and_grazing_and_is_shared_by_sub_rays() -> None:
    beam = footprint_beam(load_preset("HDL-32E"))
    d0, th, tv = beam
    assert beam == pytest.approx((0.011, 2.8e-3, 2.8e-3))
    r = np.array([5.0, 10.0, 10.0, 10.0], np.float32)
    cos = np.array([0.36, 0.18, 1.0, 0.001], np.float32)
    a = footprint_area_m2(np, beam, r, cos, 1)
    want = np.pi / 4 * (d0 + th * r.astype(float)) * (d0 + tv * r.astype(float))
    np.testing.assert_allclose(a, want / np.maximum(cos.astype(float), GRAZING_COS_MIN), rtol=1e-12)
    assert a[1] > a[0] and a[1] > a[2]  # farther, and more grazing: larger
    np.testing.assert_allclose(footprint_area_m2(np, beam, r, cos, 4), a / 4, rtol=1e-12)
    # its length along the incidence plane: the vertical divergence stretched by 1 / cos (the side of a
    # rectangle of the same area and aspect), a bundle's sub-rays each a share
    along = footprint_along_m(np, beam, r, cos, 1)
    tall = d0 + tv * r.astype(float)
    np.testing.assert_allclose(
        along, np.sqrt(np.pi / 4) * tall / np.maximum(cos.astype(float), GRAZING_COS_MIN)
    )
    np.testing.assert_allclose(footprint_along_m(np, beam, r, cos, 4), along / 2, rtol=1e-12)


def test_patches_lie_in_the_road_s_plane_and_skip_materials_without_them(xp: Any) -> None:
    pts = _road(20_000, seed=2)
    flat = _factor(xp, pts, 0.0, patch=(1.0, 0.3), sigma=0.0)
    raised = _factor(xp, pts + np.array([0.0, 0.0, 0.7]), 0.0, patch=(1.0, 0.3), sigma=0.0)
    assert flat.tobytes() == raised.tobytes()  # a horizontal lattice: the same patch at any height
    assert float(np.std(np.log(flat))) > 0.2
    # a patch spread of 0 adds nothing: the factor is the one without patches, bit for bit, also where
    # the rays of one call mix materials with and without patches
    area = 0.004
    none = _factor(xp, pts, area)
    assert _factor(xp, pts, area, patch=(1.0, 0.0)).tobytes() == none.tobytes()
    n = len(pts)
    mixed = xp.asarray(np.where(np.arange(n) % 2 == 0, 0.3, 0.0).astype(np.float32))
    args = [
        xp.asarray(pts),
        xp.full(n, 11, dtype=xp.uint64),
        xp.full(n, CELL),
        xp.full(n, SIGMA, dtype=xp.float32),
    ]
    f = _host(texture_factor(*args, xp.full(n, area), xp.full(n, 1.0), mixed))
    patched = _factor(xp, pts, area, patch=(1.0, 0.3))
    assert f[1::2].tobytes() == none[1::2].tobytes()
    assert f[0::2].tobytes() == patched[0::2].tobytes()


def test_a_footprint_longer_than_a_patch_averages_the_patches(xp: Any) -> None:
    pts = _road(40_000, seed=3)
    n = len(pts)

    def patches(along: float | None) -> np.ndarray:
        args = [xp.asarray(pts), xp.full(n, 11, dtype=xp.uint64), xp.full(n, CELL), xp.zeros(n, xp.float32)]
        extra = [xp.zeros(n), xp.full(n, 1.0), xp.full(n, 0.3, dtype=xp.float32)]
        return _host(texture_factor(*args, *extra, None if along is None else xp.full(n, along)))

    short = patches(0.5)  # shorter than a patch: read as it lies
    assert short.tobytes() == patches(None).tobytes()
    for along in (4.0, 16.0):  # the variance of a mean of along / patch_m patches in a row
        assert float(np.std(np.log(patches(along)))) == pytest.approx(0.3 / np.sqrt(along), rel=0.08)
