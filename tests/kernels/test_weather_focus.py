"""Issue 40 item 4: the weather kernels draw a particle's echo through the same focused receiver the
particle tables count it with (``optics.receiver_focus_m``, the HDL-64E's 15 m): the kernels' linear
power overlap reaches 1 where the focused detector takes the whole of a drop on the beam's axis, on
every backend (NumPy, the CUDA source built for the CPU, CuPy where a GPU is)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from rt_lidar.kernels import weather as kw
from rt_lidar.kernels import weather_rays as wr
from rt_lidar.physics.particle_receiver import collected_fraction
from rt_lidar.physics.weather import WeatherConfig, WeatherModel, particle_full_overlap_m, receiver_optics
from rt_lidar.sensor.presets import load_preset

DROP_MM = 5.0
RHO = 1.0  # bright enough that a drop of DROP_MM is detected wherever the table puts one


@functools.lru_cache(maxsize=8)
def _full_collection_range(preset_name: str, focus: bool = True) -> float:
    """The nearest range where the particle receiver's detector takes all of a drop on the beam's axis,
    found by stepping :func:`collected_fraction` (not the closed form the weather model uses): 1 cm
    steps, then 0.1 mm steps over the last centimetre."""
    rx = receiver_optics(load_preset(preset_name))
    f = rx.focus_m if focus else None

    def first_full(z: np.ndarray) -> float:
        args = (rx.aperture_m, rx.fov_rad, f)
        share = np.array([float(collected_fraction(rx.baseline_m, zz, *args)) for zz in z])
        assert share[-1] >= 1.0 - 1e-9
        return float(z[np.argmax(share >= 1.0 - 1e-9)])

    coarse = first_full(np.arange(0.5, 40.0, 1e-2))
    return first_full(np.arange(coarse - 1e-2, coarse + 1e-4, 1e-4))


def _fixed_size_params() -> kw.WeatherKernelParams:
    """The HDL-64E's weather parameters at 10 mm/h with one species of DROP_MM drops spread evenly over
    1-15 m (so each drawn echo's fill factor is known), no fog and no range noise."""
    preset = load_preset("HDL-64E")
    prm = WeatherModel(WeatherConfig(rain_mm_h=10.0)).params(preset, preset.pulse.detection_threshold_w)
    z0, dz, n = 1.0, 0.05, 281
    cum = np.linspace(0.0, 0.8, n)
    sp = kw.Species(1.0, 1.0, DROP_MM, DROP_MM, RHO, prm.species[0].flag, kw.SLOT_RAIN, z0, dz, cum)
    return prm._replace(species=(sp,), fog=kw.FogParams(0.0, 0.0, 0.0), noise_sigma_m=0.0)


def _overlap_of_each_echo(run: Callable[..., Any], to_numpy: Callable[[Any], np.ndarray]) -> tuple[Any, Any]:
    """(range, overlap) of each drop echo the kernel ``run`` writes on open-sky rays: the overlap is
    its effective reflectance over the drop's ``RHO`` times its fill factor."""
    prm = _fixed_size_params()
    n = 200_000
    r = np.full(n, np.inf, np.float32)
    p, f, refl = np.zeros(n, np.float32), np.zeros(n, np.uint8), np.zeros(n, np.float32)
    out = run(r, p, f, refl, prm)
    r, refl, f = (to_numpy(x) for x in out)
    hit = f != 0
    z = r[hit].astype(np.float64)
    fill = (DROP_MM * 1e-3 / kw.beam_diameter(z, prm.d0, prm.th_h, prm.th_v)) ** 2
    return z, refl[hit] / (RHO * fill)


def _check(run: Callable[..., Any], to_numpy: Callable[[Any], np.ndarray]) -> None:
    z_full = _full_collection_range("HDL-64E")
    z_inf = _full_collection_range("HDL-64E", focus=False)
    assert z_full < z_inf - 1.0  # the 15 m focus takes a whole on-axis drop ~2 m sooner (7.3 against 9.4 m)
    z, xi = _overlap_of_each_echo(run, to_numpy)
    assert z.size > 1000
    np.testing.assert_allclose(xi, np.clip(z / z_full, 0.0, 1.0), rtol=2e-3, atol=1e-4)
    between = (z > z_full + 0.1) & (z < z_inf - 0.1)
    assert between.sum() > 100  # where a lens focused at infinity would still dim the drop
    assert np.all(xi[between] > 0.998)


def test_the_weather_models_power_overlap_ends_where_the_focused_receiver_takes_a_whole_drop() -> None:
    for name in ("HDL-64E", "VLP-16", "AT128"):
        rx = receiver_optics(load_preset(name))
        assert particle_full_overlap_m(rx) == pytest.approx(_full_collection_range(name), abs=1e-3)


def test_numpy_kernels_draw_drop_echoes_through_the_focused_overlap() -> None:
    def run(r: Any, p: Any, f: Any, refl: Any, prm: kw.WeatherKernelParams) -> tuple[Any, Any, Any]:
        wr.apply_weather(r, p, f, refl, prm, 7)
        return r, refl, f

    _check(run, np.asarray)


def test_cuda_kernel_draws_drop_echoes_through_the_focused_overlap(cuda_backend) -> None:
    from rt_lidar.kernels.weather_cuda import CUDA_SOURCE, apply_weather_cuda

    def run(r: Any, p: Any, f: Any, refl: Any, prm: kw.WeatherKernelParams) -> tuple[Any, Any, Any]:
        g = [cuda_backend.asarray(x) for x in (r, p, f, refl)]
        launch = cuda_backend.kernel(CUDA_SOURCE, "weather_kernel")
        apply_weather_cuda(g[0], g[1], g[2], g[3], prm, 7, kernel=launch)
        return g[0], g[3], g[2]

    _check(run, cuda_backend.asnumpy)
