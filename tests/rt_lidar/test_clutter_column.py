"""The weather's clutter echo takes one column a pulse in the waveform's echo table (not one a sub-ray,
all but the first empty): a bundle's table is about half as wide in rain, and its detections are those
of the per-sub-ray layout, bit for bit, noise draws included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rt_lidar.physics import returns
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.points import PointFlag
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.scan_pattern import firings_between

_weather_echoes = returns.weather_echoes
_widened: list[int] = []


def _per_sub_ray_layout(
    echo: Any, weather: Any, hits: Any, rng: Any, rng_m: Any, power: Any, *cols: Any
) -> None:
    """:func:`returns.weather_echoes`, its clutter echo then spread to a column a sub-ray (the first
    sub-ray's holds it, the others are empty): the layout before."""
    _weather_echoes(echo, weather, hits, rng, rng_m, power, *cols)
    _widened.append(hits.subrays)
    first = np.arange(hits.pulses) * hits.subrays
    empty = (np.inf, 0.0, 0.0, 0, 0)
    for col, fill in zip(cols, empty, strict=True):
        per_pulse = col.pop()
        assert per_pulse.shape == (hits.pulses,)
        wide = np.full(len(hits), fill, per_pulse.dtype)
        wide[first] = per_pulse
        col.append(wide)


@pytest.mark.parametrize(
    ("beam", "frame"), [(BeamConfig(7, "dual", True), 2), (BeamConfig(None, "dual", True, True), 3)]
)
def test_the_clutter_column_gives_the_per_sub_ray_layout_s_detections(
    beam: BeamConfig, frame: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 40: an HDL-64E's receiver sees few drops (docs/rain.md); its flakes fill the clutter column
    cfg = PhysicsConfig(beam=beam, weather=WeatherConfig(rain_mm_h=25.0, snow_mm_h=2.0))
    pipe = build_pipeline("HDL-64E", build_world("street", seed=3), seed=3, physics=cfg).pipeline
    try:
        t0, t1 = pipe.frame_interval(frame)
        fired = firings_between(pipe.preset, t0, t1)
        hits = pipe.source.hits(fired, t0, t1)
        got = pipe.physics.apply(hits, pipe._rng(frame))
        monkeypatch.setattr(returns, "weather_echoes", _per_sub_ray_layout)
        _widened.clear()
        want = pipe.physics.apply(hits, pipe._rng(frame))
    finally:
        pipe.close()
    assert max(_widened) > 1  # the bundles went through the per-sub-ray layout
    a, b = got.points, want.points
    assert a.size == b.size
    # float32 sums of a glass pulse's echoes taken in another column order: ~10 ulp (2 ppm) at most
    np.testing.assert_allclose(got.power_w, want.power_w, rtol=2e-6)
    floats = ("x", "y", "z", "intensity", "reflectivity")
    for f in a.dtype.names:
        if f not in floats:
            assert np.array_equal(a[f], b[f]), f
    # bit for bit but for a bundled pulse whose echoes sit at other column indices in the two layouts
    # (a pane's ghost, one more echo column; sub-rays meeting two surfaces, as a car's wheel face and its
    # tyre since change 48): its float32 sums may differ in the last bits (NumPy's sort of the echoes,
    # ties in time): at most 2 ppm, on at most 0.1 % of the points; every plain pulse bit for bit
    differ = np.zeros(a.size, bool)
    for f in floats:
        np.testing.assert_allclose(a[f], b[f], rtol=2e-6, atol=1e-7)
        differ |= a[f] != b[f]
    differ |= got.power_w != want.power_w
    assert differ.sum() <= 1e-3 * a.size
    if hits.bundle is not None:  # --beam full; fixed sub-rays make every pulse a bundle
        p = hits.bundle.pulses
        bundled = set(zip(fired.ring[p].tolist(), fired.t_ns[p].tolist(), strict=True))
        for i in np.flatnonzero(differ):
            assert (int(a["ring"][i]), int(a["t"][i])) in bundled, a[i]
    flags = got.points["flags"]
    clutter = PointFlag.RAIN_CLUTTER | PointFlag.SNOW_CLUTTER
    assert np.count_nonzero(flags & clutter) > 0  # 3-7 a frame (was > 10 drops before issue 40's receiver)
    assert not np.any((flags & clutter) & (flags & PointFlag.BLOOM))
