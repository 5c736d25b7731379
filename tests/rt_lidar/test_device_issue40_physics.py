"""The device frame's physics of issue 40 (docs/gpu.md), held to the host's on the CPU twin
(``cuda-source-on-cpu``, and CuPy where a GPU is): the paints' clear coat in every echo's power, and the
ghosts behind glass: the mirror rays off each ray's first pane cast by the BVH kernel on the device, ray
by ray as the host caster casts them, and their echoes as :func:`glass_ghost_echoes` gives them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rt_lidar.api import in_process_pipeline
from rt_lidar.config import RunConfig
from rt_lidar.kernels.xp import cupy_available
from rt_lidar.physics.clear_coat import coat_factor
from rt_lidar.physics.device_physics import DeviceSensorPhysics
from rt_lidar.physics.glass_ghost import glass_ghost_echoes
from rt_lidar.pipeline.device_frame import DeviceWorldSource
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between

NO_CUDA = pytest.mark.skipif(not cupy_available(), reason="no CUDA device")
DEVICES = ["cuda-source-on-cpu", pytest.param("cuda", marks=NO_CUDA)]
FRAME_NS = 100_000_000


def _host(a: object) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a)  # type: ignore[attr-defined]


@pytest.fixture(scope="module", params=DEVICES)
def device_pair(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    config = RunConfig(preset="VLP-16", seed=3, in_process=True, device=request.param)
    config = dataclasses.replace(config, beam=BeamConfig(return_mode="dual"))
    built = in_process_pipeline(config, load_preset("VLP-16"))
    built.pipeline.close()
    source, physics = built.pipeline.source, built.pipeline.physics
    assert isinstance(source, DeviceWorldSource) and isinstance(physics, DeviceSensorPhysics)
    firings = firings_between(built.pipeline.preset, 0, FRAME_NS)
    return source, physics, firings


def test_mirror_rays_off_the_first_pane_are_cast_on_the_device_as_on_the_host(device_pair) -> None:  # type: ignore[no-untyped-def]
    source, _physics, firings = device_pair
    dev = source.hits(firings, 0, FRAME_NS)
    host = WorldSource.hits(source, firings, 0, FRAME_NS)  # the host caster, on the same BVH world
    assert host.glass_mirror_range_m is not None and dev.glass_mirror_range_m is not None
    h_r, d_r = host.glass_mirror_range_m, _host(dev.glass_mirror_range_m)
    cast = np.isfinite(h_r)
    assert cast.sum() > 50  # the street's windows send mirror rays that meet something
    assert (np.isfinite(d_r) == cast).mean() >= 0.995
    both = cast & np.isfinite(d_r)
    assert (np.abs(d_r[both] - h_r[both]) <= 1e-3).mean() >= 0.99
    with np.errstate(invalid="ignore"):
        same = both & (np.abs(d_r - h_r) <= 1e-3)
    d_mat, d_cos = _host(dev.glass_mirror_material), _host(dev.glass_mirror_cos)
    assert (d_mat[same] == host.glass_mirror_material[same]).all()
    np.testing.assert_allclose(d_cos[same], host.glass_mirror_cos[same], atol=1e-4)
    assert (_host(dev.glass_mirror_segment)[same] == host.glass_mirror_segment[same]).all()


def test_ghost_echoes_on_the_device_are_the_hosts(device_pair) -> None:  # type: ignore[no-untyped-def]
    source, physics, firings = device_pair
    dev = source.hits(firings, 0, FRAME_NS)
    ghost = physics._ghosts(dev)
    assert ghost is not None
    host_hits = dataclasses.replace(
        WorldSource.hits(source, firings, 0, FRAME_NS),
        **{
            name: _host(getattr(dev, name))
            for name in (
                "range_m",
                "glass_range_m",
                "glass_cos",
                "glass_material",
                "glass_mirror_range_m",
                "glass_mirror_cos",
                "glass_mirror_material",
                "glass_mirror_segment",
            )
        },
    )
    want = glass_ghost_echoes(physics.echo, host_hits)
    assert want is not None
    w_r, w_p, w_s, w_seg = want
    d_r, d_p, d_s, d_seg = (_host(a) for a in ghost)
    assert (w_p > 0).sum() > 50
    np.testing.assert_array_equal(d_r, w_r)
    np.testing.assert_allclose(d_p, w_p, rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(d_s, w_s, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(d_seg, w_seg)


def test_clear_coat_is_in_the_device_echo_power(device_pair) -> None:  # type: ignore[no-untyped-def]
    _source, physics, _firings = device_pair
    coat = physics.materials.coat_index
    assert coat is not None
    painted = np.flatnonzero(coat > 0)
    assert painted.size
    xp = physics.xp
    rng = np.random.default_rng(0)
    k = 4000
    mat = rng.choice(np.concatenate([painted, np.flatnonzero(coat == 0)[:3]]), k).astype(np.int16)
    cos = rng.uniform(0.02, 1.0, k).astype(np.float32)
    r = rng.uniform(1.0, 80.0, k).astype(np.float32)
    one = np.ones(k, np.float32)
    want_p, want_s = physics.echo.power(r, cos, mat, one)
    got_p, got_s = physics._power(
        xp.asarray(r), xp.asarray(cos), xp.asarray(mat.astype(np.int32)), xp.asarray(one)
    )
    np.testing.assert_allclose(_host(got_p), want_p, rtol=1e-5)
    np.testing.assert_allclose(_host(got_s), want_s, rtol=1e-5)
    # the coat is there: a painted echo at grazing incidence is a fraction of the bare base's
    graze = (coat[mat] > 0) & (cos < 0.1)
    assert graze.any()
    assert (coat_factor(cos[graze], float(coat[mat[graze][0]])) < 0.5).any()
