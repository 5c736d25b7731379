"""The compiled physics steps (``rt_lidar.physics._fused``) give the NumPy code's bits: the echo power,
reflectance and flags of every kind of ray, and the packed points of whole frames in every mode."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from rt_lidar.bridge.hits import hits_from_wire
from rt_lidar.physics import fused
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.builder import build_world
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.server.embedded_sim import EmbeddedSim

needs_compiled = pytest.mark.skipif(fused._c is None, reason="the _fused extension was not built")


@pytest.fixture
def numpy_only() -> Iterator[None]:
    fused.enabled = False
    try:
        yield
    finally:
        fused.enabled = True


def _frame(preset_name: str = "HDL-64E", frames: int = 2) -> tuple[list[Hits], list[str]]:
    preset = load_preset(preset_name)
    sim = EmbeddedSim(build_world("street", seed=0), preset, paused=True, cast_threads=1)
    out = []
    for _ in range(frames):
        sim.continue_for_time(0.05)
        w = sim.lidar_hits("", "")
        expected = firings_between(preset, int(w.info["t0_ns"]), int(w.info["t1_ns"]))
        out.append(hits_from_wire(w, expected=expected))
    return out, list(w.info["materials"])


def _odd_rays(n: int, n_materials: int, seed: int) -> tuple[np.ndarray, ...]:
    """Ranges with misses (inf), NaN, zero and tiny; cosines outside [0, 1] and NaN; every material
    and none (-1); glass on some rays."""
    rng = np.random.default_rng(seed)
    r = rng.uniform(0.0, 150.0, n).astype(np.float32)
    r[rng.integers(0, n, n // 10)] = np.inf
    r[rng.integers(0, n, 5)] = np.nan
    r[rng.integers(0, n, 5)] = 0.0
    r[rng.integers(0, n, 5)] = 1e-6
    r[rng.integers(0, n, 5)] = -0.0
    c = rng.uniform(-0.2, 1.2, n).astype(np.float32)
    c[rng.integers(0, n, 5)] = np.nan
    c[rng.integers(0, n, 5)] = 0.0
    c[rng.integers(0, n, 20)] = -0.0  # np.clip keeps its sign, and powf(-0, 1) is -0
    c[rng.integers(0, n, 5)] = 1.0
    mat = rng.integers(-1, n_materials, n).astype(np.int16)
    extra = rng.uniform(0.0, 1.0, n).astype(np.float32)
    glass = np.where(rng.random(n) < 0.2, rng.integers(0, n_materials, n), -1).astype(np.int16)
    return r, c, mat, extra, glass


@pytest.fixture(params=["powf", "numpy_lobes"])
def lobe_powers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways the compiled echo power takes the lobes' powers: the C library's powf (where it is
    NumPy's), or NumPy's own power handed in (as on AVX-512 CPUs, where NumPy takes Intel's SVML)."""
    if request.param == "numpy_lobes":
        monkeypatch.setattr(fused, "powf_is_numpys", lambda: False)
    return str(request.param)


@needs_compiled
@pytest.mark.parametrize("seed", range(4))
def test_echo_power_and_object_echoes_are_numpy_s(seed: int, lobe_powers: str) -> None:
    _frames, names = _frame("VLP-16", 1)
    physics = SensorPhysics.from_preset(load_preset("HDL-64E"), names)
    echo = physics.echo
    r, c, mat, extra, glass = _odd_rays(20_000, len(names), seed)
    hits = _frames[0]
    n = len(hits.range_m)
    r, c, mat, extra, glass = r[:n], c[:n], mat[:n], extra[:n], glass[:n]
    hits.range_m, hits.cos_incidence, hits.material = r, c, mat
    hits.glass_transmission, hits.glass_material = extra, glass
    with np.errstate(all="ignore"):
        got_power = echo.power(r, c, np.maximum(mat, 0), extra)
        got_obj = echo.object_echoes(hits)
        fused.enabled = False
        try:
            want_power = echo.power(r, c, np.maximum(mat, 0), extra)
            want_obj = echo.object_echoes(hits)
        finally:
            fused.enabled = True
    for a, b in zip(got_power, want_power, strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    for a, b in zip(got_obj, want_obj, strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert (got_obj[4] > 0).any() and (got_obj[0] > 0).any()


@needs_compiled
def test_a_material_past_the_tables_is_refused_as_numpy_refuses_it() -> None:
    _frames, names = _frame("VLP-16", 1)
    echo = SensorPhysics.from_preset(load_preset("VLP-16"), names).echo
    r = np.full(3, 10.0, np.float32)
    bad = np.array([0, len(names), 1], np.int16)
    with pytest.raises(IndexError):
        echo.power(r, np.ones(3, np.float32), bad, np.ones(3, np.float32))
    fused.enabled = False
    try:
        with pytest.raises(IndexError):
            echo.power(r, np.ones(3, np.float32), bad, np.ones(3, np.float32))
    finally:
        fused.enabled = True


CONFIGS = {
    "default": PhysicsConfig(),
    "rain_fog": PhysicsConfig(weather=WeatherConfig(rain_mm_h=25.0, fog_visibility_m=200.0)),
    "dual_subrays": PhysicsConfig(beam=BeamConfig(sub_rays=7, return_mode="dual", epw=True)),
    "sun": PhysicsConfig(sun_illuminance_lux=80_000.0),
    "wet": PhysicsConfig(weather=WeatherConfig(road_wetness=0.8)),
}


@needs_compiled
@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("preset_name", ["HDL-64E", "OS1-64"])
def test_whole_frames_are_the_numpy_code_s_points(config: str, preset_name: str) -> None:
    frames, names = _frame(preset_name)
    preset = load_preset(preset_name)
    results = {}
    for on in (True, False):
        fused.enabled = on
        try:
            cfg = CONFIGS[config]
            if cfg.beam is not None and preset.name == "OS1-64":  # one return: sub-rays, strongest
                cfg = PhysicsConfig(beam=BeamConfig(sub_rays=7, epw=True))
            physics = SensorPhysics.from_preset(preset, names, config=cfg)
            results[on] = [
                physics.apply(h, np.random.Generator(np.random.PCG64(np.random.SeedSequence([3, k]))))
                for k, h in enumerate(frames)
            ]
        finally:
            fused.enabled = True
    for a, b in zip(results[True], results[False], strict=True):
        assert len(a.points) > 1000
        assert a.points.dtype == b.points.dtype and a.points.tobytes() == b.points.tobytes()
        assert a.power_w.tobytes() == b.power_w.tobytes()
        assert (a.epw_ns is None) == (b.epw_ns is None)


def test_zero_below_is_where_numpy_s_power_underflows() -> None:
    """The compiled step skips powf at or below the threshold: np.power is exactly 0 there (every cosine
    in the 20,000 float32 steps below it and 10^6 drawn under it) and not one step above."""
    gain = np.array([0.0, 4.0, 50.0, 150.0, 2.0, 5.0, 3.0], np.float32)
    exponent = np.array([1.0, 800.0, 20_000.0, 2_000.0, 1.5, 200.0, 0.0], np.float32)
    zero = fused.zero_below(gain, exponent)
    assert zero[0] == -1.0 and zero[6] == -1.0  # no lobe; an exponent whose power never underflows
    rng = np.random.default_rng(11)
    for z, e in zip(zero[1:6].tolist(), exponent[1:6].tolist(), strict=True):
        bits = int(np.float32(z).view(np.int32))
        window = np.arange(bits - 20_000, bits + 1, dtype=np.int32).view(np.float32)
        assert (np.power(window, np.float32(e)) == 0).all()
        assert np.power(np.array(bits + 1, np.int32).view(np.float32), np.float32(e)) > 0
        below = rng.uniform(0.0, z, 1_000_000).astype(np.float32)
        assert (np.power(below, np.float32(e)) == 0).all()


@needs_compiled
@pytest.mark.parametrize("seed", range(3))
def test_detect_and_range_noise_on_odd_values_are_numpy_s(seed: int) -> None:
    """Zero, negative, tiny, NaN and infinite powers and ranges; the draws are the same."""
    from rt_lidar.kernels import apply_range_noise
    from rt_lidar.kernels.ambient import receiver_sigma_w

    rng = np.random.default_rng(seed)
    n = 30_000
    power = (10.0 ** rng.uniform(-12, -4, n)).astype(np.float32)
    power[rng.integers(0, n, 50)] = 0.0
    power[rng.integers(0, n, 20)] = -1e-9
    power[rng.integers(0, n, 5)] = np.nan
    power[rng.integers(0, n, 5)] = np.inf
    rng_m = rng.uniform(-1.0, 130.0, n).astype(np.float32)
    rng_m[rng.integers(0, n, 10)] = np.inf
    rng_m[rng.integers(0, n, 5)] = np.nan
    rng_m[rng.integers(0, n, 5)] = -0.0
    sigma = 10.0 ** rng.uniform(-9, -7, n)
    shot, thr, lo, hi = 3.3e-20, 1.1e-8, 0.9, 120.0
    with np.errstate(all="ignore"):
        got = fused.detect(power, sigma, np.random.default_rng(9), shot, thr, rng_m, lo, hi)
        z = np.random.default_rng(9).standard_normal(n)
        s = receiver_sigma_w(sigma, shot, power.astype(np.float64))
        want = np.nonzero((power + s * z >= thr) & (rng_m >= lo) & (rng_m <= hi))[0]
        assert got is not None and 1000 < got.size < n and got.tolist() == want.tolist()
        pulse = np.sort(rng.choice(n, 20_000, replace=False))
        noise = rng.standard_normal(pulse.size, np.float32)
        pw, r = power[pulse], rng_m[pulse]
        out = fused.range_noise(r, noise, pw, sigma, pulse, shot, 0.02, 1.7)
        s_tot = receiver_sigma_w(sigma[pulse], shot, pw.astype(np.float64))
        ref = np.maximum(apply_range_noise(r, noise, 0.02, pw, s_tot, 1.7), 0.0).astype(np.float32)
    assert out is not None and out.tobytes() == ref.tobytes()
    for bad in (-1, n):  # a pulse index outside the pulses is refused, wherever it is
        wrong = pulse.copy()
        wrong[pulse.size // 2] = bad
        with pytest.raises(IndexError, match=f"pulse\\[{pulse.size // 2}\\]"):
            fused.range_noise(r, noise, pw, sigma, wrong, shot, 0.02, 1.7)


@needs_compiled
def test_negative_materials_and_other_types_take_the_numpy_code() -> None:
    """power() of a negative material wraps around as np.take does (the NumPy code runs); float64
    inputs keep NumPy's float64 results."""
    _frames, names = _frame("VLP-16", 1)
    echo = SensorPhysics.from_preset(load_preset("VLP-16"), names).echo
    r = np.array([5.0, 12.0, 40.0], np.float32)
    c = np.array([0.9, 0.5, 1.0], np.float32)
    mat = np.array([-1, -2, 3], np.int16)
    assert fused.echo_power(echo, r, c, mat, np.ones(3, np.float32)) is None
    assert fused.echo_power(echo, r.astype(np.float64), c, mat, np.ones(3, np.float32)) is None
    got = echo.power(r, c, mat, np.ones(3, np.float32))
    fused.enabled = False
    try:
        want = echo.power(r, c, mat, np.ones(3, np.float32))
    finally:
        fused.enabled = True
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want, strict=True))


@needs_compiled
def test_echo_power_calls_powf_only_where_numpy_s_power_is_powf() -> None:
    """On a CPU where NumPy's float32 power is not the C library's powf (AVX-512: Intel's SVML) the
    compiled echo power takes the lobes' powers from NumPy and never calls powf; where it calls powf,
    powf gives np.power's bits around every lobe's underflow threshold."""
    from numpy._core._multiarray_umath import __cpu_features__

    assert fused.powf_is_numpys() == (
        not __cpu_features__.get("AVX512_SKX", False) and fused.powf_is_numpys()
    )
    if not fused.powf_is_numpys():
        _frames, names = _frame("VLP-16", 1)
        echo = SensorPhysics.from_preset(load_preset("VLP-16"), names).echo
        r = np.full(4096, 9.0, np.float32)
        c = np.random.default_rng(1).random(4096, dtype=np.float32)
        mat = np.arange(4096).astype(np.int16) % len(names)
        got = fused.echo_power(echo, r, c, mat, np.ones(4096, np.float32))
        fused.enabled = False
        try:  # the backend's echo step itself (EchoModel.power adds the paints' clear coat after it)
            want = echo.backend.echo_power(echo, r, c, mat, np.ones(4096, np.float32))
        finally:
            fused.enabled = True
        assert got is not None and got[1].tobytes() == want[1].tobytes()
        return
    for e in (1.5, 200.0, 800.0, 2_000.0, 20_000.0):
        z = fused.zero_below(np.array([1.0], np.float32), np.array([e], np.float32))[0]
        bits = int(np.float32(z).view(np.int32))
        c = np.arange(bits - 5_000, bits + 5_000, dtype=np.int32).view(np.float32)
        ee = np.full(c.shape, e, np.float32)
        out = np.empty_like(c)
        fused._c.powf_array(c, ee, out)
        assert out.tobytes() == np.power(c, ee).tobytes()


@needs_compiled
def test_numpy_lobe_powers_are_the_lobes_numpy_adds() -> None:
    """Each lobe's power is given for exactly the rays whose material (clipped at 0) has the lobe, as
    np.power gives it on the clipped cosine; a lobe no material has is None."""
    _frames, names = _frame("VLP-16", 1)
    echo = SensorPhysics.from_preset(load_preset("VLP-16"), names).echo
    _r, c, mat, _extra, _glass = _odd_rays(5_000, len(names), 7)
    retro, specular = fused.numpy_lobe_powers(echo, c, mat)
    m = echo.materials
    material = np.maximum(mat, 0)
    clipped = np.clip(c, 0.0, 1.0)
    for gain, exponent, got in (
        (m.retro_gain, m.retro_exponent, retro),
        (m.specular_gain, m.specular_exponent, specular),
    ):
        if not (gain > 0).any():
            assert got is None
            continue
        assert got is not None and got.dtype == np.float32 and got.shape == c.shape
        has = gain[material] > 0
        assert has.any() and (~has).any()
        want = np.power(clipped[has], exponent[material[has]])
        assert got[has].tobytes() == want.tobytes()
        assert not got[~has].any()


def test_the_sure_underflow_bound_lies_below_numpy_s_own_underflow() -> None:
    """Below ``surely_underflows_below`` NumPy's float32 power is +0 (checked on the 20,000 cosines
    just under each bound), and every bound is under the cosine where NumPy's power really starts
    to underflow (``zero_below``'s bisection): the lobes skip only powers NumPy rounds to 0."""
    exponents = np.array([0.5, 1.0, 1.07, 1.5, 2.0, 3.7, 12.0, 200.0, 800.0, 2_000.0, 20_000.0], np.float32)
    bound = fused.surely_underflows_below(exponents)
    underflow = fused.zero_below(np.ones_like(exponents), exponents)
    assert bound[0] == 0 and bound[1] == 0  # 2**-160 is no float32: nothing skipped
    assert (bound[-4:] > 0.5).all()
    for e, b, z in zip(exponents.tolist(), bound.tolist(), underflow.tolist(), strict=True):
        assert b <= max(z, 0.0)
        if b > 0:
            top = int(np.float32(b).view(np.int32))
            c = np.arange(max(top - 20_000, 1), top + 1, dtype=np.int32).view(np.float32)
            assert not np.power(c, np.float32(e)).view(np.uint32).any()


@needs_compiled
def test_numpy_lobe_powers_around_the_sure_underflow_bounds_are_numpy_s() -> None:
    """Cosines just under and over each lobe's bound, at 0, -0 and the subnormals: the lobes that skip
    the sure underflows are np.power's bits (the sign of -0 kept)."""
    _frames, names = _frame("VLP-16", 1)
    echo = SensorPhysics.from_preset(load_preset("VLP-16"), names).echo
    m = echo.materials
    for gain, exponent, which in (
        (m.retro_gain, m.retro_exponent, 0),
        (m.specular_gain, m.specular_exponent, 1),
    ):
        for k in np.flatnonzero(gain > 0):
            b = int(np.float32(fused.surely_underflows_below(exponent)[k]).view(np.int32))
            bits = np.concatenate([np.arange(b - 3_000, b + 3_000), np.arange(0, 50), [0x7FC00000]])
            c = np.concatenate([bits.astype(np.int32).view(np.float32), np.float32([-0.0, 1.0, 0.5])])
            mat = np.full(c.shape, k, np.int16)
            got = fused.numpy_lobe_powers(echo, c, mat)[which]
            # an exponent a ray, as effective_reflectance takes it: NumPy's power of an array by a scalar
            # 1.0 hands a NaN back as it is, its power of two arrays may clear the NaN's sign (glibc's
            # powf, on a CPU without AVX-512)
            with np.errstate(invalid="ignore"):
                want = np.power(np.clip(c, 0.0, 1.0), np.full(c.shape, exponent[k], np.float32))
            assert got is not None and got.tobytes() == want.tobytes()


@needs_compiled
@pytest.mark.parametrize("seed", range(3))
def test_the_compiled_lobe_rays_are_the_numpy_twin_s(seed: int) -> None:
    """``_fused.lobe_rays`` picks the same rays, cosines and exponents as ``_numpy_lobe_rays`` (odd
    cosines: NaN, -0, outside [0, 1]; every material and none), and the lobes from either way are the
    same bytes; a material past the tables is refused."""
    _frames, names = _frame("VLP-16", 1)
    echo = SensorPhysics.from_preset(load_preset("VLP-16"), names).echo
    _r, c, mat, _extra, _glass = _odd_rays(30_000, len(names), seed)
    m = echo.materials
    for gain, exponent in ((m.retro_gain, m.retro_exponent), (m.specular_gain, m.specular_exponent)):
        if not (gain > 0).any():
            continue
        n = c.shape[0]
        idx, cs, es = np.empty(n, np.int64), np.empty(n, np.float32), np.empty(n, np.float32)
        bound = fused.surely_underflows_below(exponent)
        k = fused._c.lobe_rays(c, mat, gain, exponent, bound, idx, cs, es)
        want = fused._numpy_lobe_rays(np.clip(c, 0.0, 1.0), np.maximum(mat, 0), gain, exponent)
        assert 0 < k < n
        for got, w in zip((idx[:k], cs[:k], es[:k]), want, strict=True):
            assert got.tobytes() == w.astype(got.dtype).tobytes()
        bad = mat.copy()
        bad[17] = len(names)
        with pytest.raises(IndexError, match=f"material {len(names)} of ray 17"):
            fused._c.lobe_rays(c, bad, gain, exponent, bound, idx, cs, es)
    compiled = fused.numpy_lobe_powers(echo, c, mat)
    twin = fused.numpy_lobe_powers(echo, c, mat.astype(np.int32))  # not int16: the NumPy twin
    for a, b in zip(compiled, twin, strict=True):
        assert (a is None and b is None) or (a is not None and b is not None and a.tobytes() == b.tobytes())
