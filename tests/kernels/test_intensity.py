import numpy as np
import pytest

from rt_lidar.kernels import (
    apply_range_noise,
    calibrated_reflectivity_output,
    effective_reflectance,
    raw_intensity_output,
    received_power,
    received_power_output,
    two_way_transmission,
)
from rt_lidar.kernels.xp import cupy_available

BACKENDS = ["numpy"] + (["cupy"] if cupy_available() else [])


def _xp(name):
    if name == "cupy":
        import cupy

        return cupy
    return np


@pytest.fixture(params=BACKENDS)
def xp(request):
    return _xp(request.param)


def _refl(xp, c, diffuse, retro_gain=0.0, retro_exp=1.0, spec_gain=0.0, spec_exp=1.0):
    """Effective reflectance of one material at every cosine in ``c``."""
    one = [lambda v: xp.asarray([float(v)])][0]
    mat = xp.zeros(len(c), dtype=xp.int64)
    return effective_reflectance(
        c, mat, one(diffuse), one(retro_gain), one(retro_exp), one(spec_gain), one(spec_exp)
    )


def test_lambertian_is_rho_cos(xp):
    c = xp.asarray([1.0, 0.5, 0.0])
    s = _refl(xp, c, 0.3)
    np.testing.assert_allclose(np.asarray(s.get() if hasattr(s, "get") else s), [0.3, 0.15, 0.0])


def test_mixed_materials_index_their_own_terms(xp):
    c = xp.asarray([1.0, 1.0, 0.5])
    mat = xp.asarray([0, 1, 1])
    s = effective_reflectance(
        c,
        mat,
        xp.asarray([0.2, 0.5]),
        xp.asarray([0.0, 10.0]),
        xp.asarray([1.0, 2.0]),
        xp.asarray([0.0, 0.0]),
        xp.asarray([1.0, 1.0]),
    )
    got = np.asarray(s.get() if hasattr(s, "get") else s)
    np.testing.assert_allclose(got, [0.2, 10.5, 0.25 + 10.0 * 0.25])


def test_power_falls_with_r_squared_and_extinction(xp):
    r = xp.asarray([10.0, 20.0])
    p = received_power(r, 0.5, 1.0, 100.0, 0.02, 0.8)
    p = np.asarray(p.get() if hasattr(p, "get") else p)
    assert p[0] / p[1] == pytest.approx(4.0)
    assert p[0] == pytest.approx(100.0 * 0.02**2 * 0.8 * 0.5 / (4 * 100.0))  # issue 14: / 4, not / 16
    t = two_way_transmission(xp.asarray([100.0]), 1e-3)
    assert float(t[0]) == pytest.approx(np.exp(-0.2))


def test_retro_beats_paint_beats_asphalt_and_specular_only_at_normal(xp):
    c = xp.asarray([0.9])
    retro = _refl(xp, c, 0.6, 300.0, 1.0)
    paint = _refl(xp, c, 0.75, 2.0, 1.5)
    asphalt = _refl(xp, c, 0.28)
    assert float(retro[0]) > float(paint[0]) > float(asphalt[0])
    chrome = _refl(xp, xp.asarray([1.0, 0.95]), 0.04, 0.0, 1.0, 500.0, 2000.0)
    assert float(chrome[0]) > 100 and float(chrome[1]) < 0.1


def test_noise_scales_with_accuracy_and_snr(xp):
    rng = np.random.default_rng(1)
    z = xp.asarray(rng.standard_normal(20000))
    # sigma^2 = accuracy^2 + (c/2 sigma_pulse noise / power)^2: 1 / sqrt(power SNR) (issue 14 item 8)
    sigma_p = 2.0  # ns: c/2 * 2 ns = 0.2998 m at SNR 1
    strong = apply_range_noise(xp.full(20000, 10.0), z, 0.02, 1e3, 1.0, sigma_p)
    weak = apply_range_noise(xp.full(20000, 10.0), z, 0.02, 10.0, 1.0, sigma_p)
    assert float(xp.std(strong)) == pytest.approx(0.02, rel=0.05)
    assert float(xp.std(weak)) == pytest.approx(np.hypot(0.02, 0.029979), rel=0.05)


def test_output_scales(xp):
    s = xp.asarray([0.0, 0.5, 1.0, 10.0, 1000.0, 1e6])
    out = calibrated_reflectivity_output(s, 100.0, 255.0)
    out = np.asarray(out.get() if hasattr(out, "get") else out)
    np.testing.assert_allclose(out[:3], [0, 50, 100])
    assert 101 <= out[3] < out[4] == 255.0 == out[5]
    counts = received_power_output(xp.asarray([1.0, 2.0, 1e9]), 1.0, 65535.0)
    np.testing.assert_allclose(
        np.asarray(counts.get() if hasattr(counts, "get") else counts), [10, 20, 65535]
    )


def test_leading_edge_walk_on_every_backend(xp):
    """Range walk (issue 14 item 8) on NumPy and, where a GPU is, CuPy: 0 up to saturation, then
    -(c/2) s (sqrt(2 ln(P/T)) - sqrt(2 ln(P_sat/T)))."""
    from rt_lidar.kernels.intensity import SPEED_OF_LIGHT, leading_edge_walk_m

    p = xp.asarray([0.5, 1.0, 100.0, 1e3, 1e6])
    w = leading_edge_walk_m(p, 1.0, 2.0, 1e3)
    w = np.asarray(w.get() if hasattr(w, "get") else w)
    expected = -0.5e-9 * SPEED_OF_LIGHT * 2.0 * (np.sqrt(2 * np.log(1e6)) - np.sqrt(2 * np.log(1e3)))
    np.testing.assert_allclose(w, [0, 0, 0, 0, expected], rtol=1e-9, atol=1e-12)


def test_raw_intensity_is_linear_to_its_knee_and_compressed_above_on_every_backend(xp):
    # the HDL-64E S2's byte (docs/realism.md change 36): gain 630, knee 160
    refl = xp.asarray([-0.1, 0.0, 0.12, 160 / 630, 0.5, 0.8, 1.6, 300.0], dtype=xp.float32)
    got = np.asarray(
        xp.asnumpy(raw_intensity_output(refl, 630.0, 255, 160.0))
        if xp is not np
        else raw_intensity_output(refl, 630.0, 255, 160.0)
    )
    assert got[0] == 0 and got[1] == 0
    assert got[2] == pytest.approx(0.12 * 630, rel=1e-6) and got[3] == pytest.approx(160, rel=1e-6)
    w = 255 - 160
    assert got[4] == pytest.approx(160 + w * (1 - np.exp(-(0.5 * 630 - 160) / w)), rel=1e-6)
    assert got[4] < got[5] < 254.5 <= got[6] <= 255 and got[7] == 255
    lin = raw_intensity_output(refl, 630.0, 255)
    lin = np.asarray(xp.asnumpy(lin) if xp is not np else lin)
    assert lin[4] == 255 and lin[2] == got[2]  # the linear byte clips what the knee compresses
