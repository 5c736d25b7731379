"""The single-return physics' element-wise steps in one compiled pass each, where ``_fused`` was built.

Each function here gives the NumPy code's values bit for bit (``tests/rt_lidar/test_physics_fused.py``
holds them to it) or returns None when its inputs are not the NumPy arrays it knows, and the caller then
runs the NumPy code. The exponential is NumPy's own in both.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from rt_lidar.kernels.intensity import SPEED_OF_LIGHT, sensor_constant
from rt_lidar.physics import normals
from rt_lidar.physics.clear_coat import coat_table, paint_params
from rt_lidar.physics.pulse_spread import MIN_COS, peak_factor_k
from rt_lidar.points import POINT_DTYPE, PointFlag

if TYPE_CHECKING:
    from rt_lidar.physics.echo import EchoModel
    from rt_lidar.sensor.materials import MaterialArrays
    from rt_lidar.sensor.presets import SensorPreset

try:
    from rt_lidar.physics import _fused as _c
except ImportError:  # built without a C compiler: the NumPy code runs
    _c = None  # type: ignore[assignment]

__all__ = [
    "available",
    "detect",
    "detections",
    "echo_power",
    "numpy_lobe_powers",
    "pack_points",
    "prepare",
    "range_noise",
    "surely_underflows_below",
    "zero_below",
]

_POINT_OFFSETS = tuple(int(POINT_DTYPE.fields[n][1]) for n in POINT_DTYPE.names or ())  # type: ignore[index]

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled steps off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` in the environment starts
every process with the NumPy code, for comparing whole runs)."""


def available() -> bool:
    """Whether the compiled steps run."""
    return _c is not None and enabled


def prepare() -> None:
    """Make now the once-per-process checks the compiled steps make at their first use
    (:func:`powf_is_numpys` and :func:`rt_lidar.physics.normals.check`, ~30 ms each), so that a frame
    loop's first frame does not carry them; and the check of the NumPy loops that issue 43's twins borrow
    (:mod:`rt_lidar.kernels.np_loops`, a few ms)."""
    if available():
        powf_is_numpys()
        normals.check()
    from rt_lidar.kernels import waveform_pulses
    from rt_lidar.physics import intensity_fused, path_factor_fused, texture_fused

    waveform_pulses.available()
    intensity_fused.available()
    texture_fused.available()
    path_factor_fused.available()


@functools.cache
def powf_is_numpys() -> bool:
    """Whether NumPy's float32 power is the C library's ``powf`` here, which echo_power calls for the
    reflectance lobes: NumPy takes Intel's SVML instead on CPUs with AVX512_SKX, and its values may
    differ in the last bit (there echo_power takes the lobes' powers from NumPy,
    :func:`numpy_lobe_powers`). Checked once: not on such a CPU, and the same bits on cosines across [0, 1]
    (the edges, 4,096 drawn and the steps around each exponent's underflow) for every exponent the
    material table has and a spread of others."""
    from numpy._core._multiarray_umath import __cpu_features__

    if _c is None or __cpu_features__.get("AVX512_SKX", False):
        return False
    from rt_lidar.sensor.materials import load_material_table

    table = load_material_table()
    arrays = table.arrays(list(table.names), 905.0)
    exps = {float(e) for e in (*arrays.retro_exponent.tolist(), *arrays.specular_exponent.tolist())}
    exps |= {0.5, 1.0, 1.5, 2.0, 3.7, 12.0, 200.0, 800.0, 2_000.0, 20_000.0}
    edges = np.array([0.0, -0.0, 1e-38, 1e-6, 0.5, 0.999, 1.0, np.nan], np.float32)
    drawn = np.concatenate([edges, np.random.default_rng(0).random(4096, dtype=np.float32)])
    for e in sorted(exps):
        c = drawn
        z = zero_below(np.array([1.0], np.float32), np.array([e], np.float32))[0]
        if z > 0:
            bits = int(np.float32(z).view(np.int32))
            c = np.concatenate([c, np.arange(bits - 64, bits + 64, dtype=np.int32).view(np.float32)])
        ee = np.full(c.shape, e, np.float32)
        out = np.empty_like(c)
        _c.powf_array(c, ee, out)
        if out.tobytes() != np.power(c, ee).tobytes():
            return False
    return True


def zero_below(gain: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """Per material, the largest float32 cosine c in [0, 1] whose ``np.power(c, exponent)`` is exactly 0
    (-1 for a material without the lobe, or whose power never underflows): found by bisection on the
    float32 bit patterns, which order like the values for c >= 0, with NumPy's own power (the C
    library's powf, which the compiled step calls above it; a smaller cosine underflows too).
    Remembered per table (read-only)."""
    return _zero_below(np.asarray(gain, np.float32).tobytes(), np.asarray(exponent, np.float32).tobytes())


@functools.lru_cache(maxsize=64)
def _zero_below(gain_bytes: bytes, exponent_bytes: bytes) -> np.ndarray:
    gain = np.frombuffer(gain_bytes, np.float32)
    exponent = np.frombuffer(exponent_bytes, np.float32)
    out = np.full(gain.shape, -1.0, np.float32)
    one = int(np.float32(1.0).view(np.int32))
    for i, (g, e) in enumerate(zip(gain.tolist(), exponent.tolist(), strict=True)):
        e32 = np.float32(e)
        if not g > 0 or np.power(np.float32(0.0), e32) != 0 or np.power(np.float32(1.0), e32) == 0:
            continue
        lo, hi = 0, one  # power(lo) == 0, power(hi) != 0
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if np.power(np.array(mid, np.int32).view(np.float32), e32) == 0:
                lo = mid
            else:
                hi = mid
        out[i] = np.array(lo, np.int32).view(np.float32)
    out.flags.writeable = False
    return out


def _f32(a: Any, n: int) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == (n,)


def echo_power(
    model: EchoModel,
    range_m: Any,
    cos_inc: Any,
    mat: Any,
    extra_t: Any,
    glass_material: Any = None,
    path: Any = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """``(power, effective reflectance, flags)`` as :meth:`EchoModel.power` gives the first two (the
    materials clipped at 0 first); with ``glass_material`` as :meth:`EchoModel.object_echoes` gives them
    (power 0 where ``mat`` < 0, and the THROUGH_GLASS flags), else flags None; ``path``: the model's
    path factor at ``range_m`` where the caller has it (else computed here). None: not NumPy arrays
    of the types the compiled step takes."""
    if not available() or not isinstance(range_m, np.ndarray):
        return None
    n = range_m.shape[0]
    if not (
        _f32(range_m, n)
        and _f32(extra_t, n)
        and isinstance(cos_inc, np.ndarray)
        and cos_inc.shape == (n,)
        and isinstance(mat, np.ndarray)
        and mat.dtype == np.int16
        and mat.shape == (n,)
        and (glass_material is None or (glass_material.dtype == np.int16 and glass_material.shape == (n,)))
    ):
        return None
    if glass_material is None and mat.size and int(mat.min()) < 0:
        return None  # power() of a negative material: np.take's wrap-around, which the C does not do
    m, p = model.materials, model.preset
    tables = (m.diffuse, m.retro_gain, m.retro_exponent, m.specular_gain, m.specular_exponent)
    k = sensor_constant(p.pulse.peak_power_w, p.optics.receiver_aperture_m, p.optics.system_efficiency)
    if not all(isinstance(t, np.ndarray) and t.dtype == np.float32 for t in tables) or type(k) is not float:
        return None  # other types would promote the NumPy code's results past float32
    if path is None:
        with np.errstate(over="ignore", invalid="ignore"):
            path = model.path_factor(range_m)
    trans0 = np.asarray(path)
    if trans0.dtype != np.float32 or trans0.shape != (n,):
        return None
    lobes = (None, None) if powf_is_numpys() else numpy_lobe_powers(model, cos_inc, mat)
    power = np.empty(n, np.float32)
    refl = np.empty(n, np.float32)
    flags = None if glass_material is None else np.empty(n, np.uint8)
    _c.echo_power(
        np.ascontiguousarray(range_m),
        np.ascontiguousarray(cos_inc, np.float32),
        np.ascontiguousarray(mat),
        np.ascontiguousarray(extra_t),
        np.ascontiguousarray(trans0),
        *(np.ascontiguousarray(t) for t in tables),
        zero_below(m.retro_gain, m.retro_exponent),
        zero_below(m.specular_gain, m.specular_exponent),
        k,
        power,
        refl,
        None if glass_material is None else np.ascontiguousarray(glass_material),
        flags,
        int(PointFlag.THROUGH_GLASS),
        *lobes,
    )
    return power, refl, flags


def numpy_lobe_powers(
    model: EchoModel, cos_inc: np.ndarray, mat: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The retro-reflective and specular lobes' ``cos ** exponent`` of every ray whose material (clipped
    at 0) has the lobe, by NumPy's own power on the same arrays :func:`rt_lidar.kernels.effective_reflectance`
    gives it (other rays read 0, unused); None for a lobe no material has. :func:`echo_power` hands these
    to the compiled step where NumPy's float32 power is not the C library's powf (AVX-512: Intel's SVML),
    so that the rest of the step stays compiled and every value NumPy's. NumPy is asked only for the
    powers that do not surely underflow (:func:`surely_underflows_below`; the others are its +0), and
    the rays are picked by the compiled ``lobe_rays`` where it is built and the types allow."""
    m = model.materials
    compiled = _c is not None and isinstance(mat, np.ndarray) and mat.dtype == np.int16
    cos32 = np.ascontiguousarray(cos_inc, np.float32)
    out: list[np.ndarray | None] = []
    for gain, exponent in ((m.retro_gain, m.retro_exponent), (m.specular_gain, m.specular_exponent)):
        if not bool((gain > 0).any()):
            out.append(None)
            continue
        lobe = np.zeros(cos32.shape[0], np.float32)
        # a power that surely underflows is +0 without asking NumPy: on AVX-512 its SVML power takes
        # ~90 ns a value on its underflow path against ~0.5 on its vector path, and a specular lobe's
        # exponent of 800-20,000 underflows on most rays
        if compiled and all(t.dtype == np.float32 for t in (gain, exponent)):
            idx = np.empty(cos32.shape[0], np.int64)
            cs, es = np.empty(cos32.shape[0], np.float32), np.empty(cos32.shape[0], np.float32)
            bound = surely_underflows_below(exponent)
            tables = (np.ascontiguousarray(gain), np.ascontiguousarray(exponent), bound)
            k = _c.lobe_rays(cos32, np.ascontiguousarray(mat), *tables, idx, cs, es)
            idx, cs, es = idx[:k], cs[:k], es[:k]
        else:
            idx, cs, es = _numpy_lobe_rays(np.clip(cos32, 0.0, 1.0), np.maximum(mat, 0), gain, exponent)
        lobe[idx] = cs**es
        out.append(lobe)
    return out[0], out[1]


def _numpy_lobe_rays(
    c: np.ndarray, material: np.ndarray, gain: np.ndarray, exponent: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The NumPy twin of ``_fused.lobe_rays``: the rays whose material has the lobe and whose power
    does not surely underflow, with their (clipped) cosines and exponents."""
    sel = np.flatnonzero(np.take(gain, material) > 0)
    of = np.take(material, sel)
    cs = np.take(c, sel)
    zero = (cs > 0) & (cs < np.take(surely_underflows_below(exponent), of))  # not -0: powf keeps its sign
    keep = np.flatnonzero(~zero)
    return np.take(sel, keep), np.take(cs, keep), np.take(exponent, np.take(of, keep))


SURE_UNDERFLOW_LOG2 = -160.0
"""A true power below 2**-160, 11 binades under float32's smallest subnormal (2**-149), is +0 in any
powf within 2**10 subnormal steps of the true value: far looser than NumPy's (the C library's, or
Intel's SVML on AVX-512 CPUs)."""


def surely_underflows_below(exponent: np.ndarray) -> np.ndarray:
    """Per material, a float32 cosine below which (and above 0) ``cos ** exponent`` is below
    2**:data:`SURE_UNDERFLOW_LOG2`, so that NumPy's float32 power gives +0 there (0: none, for an
    exponent that is not positive). Remembered per table (read-only)."""
    return _surely_underflows_below(np.asarray(exponent, np.float32).tobytes())


@functools.lru_cache(maxsize=64)
def _surely_underflows_below(exponent_bytes: bytes) -> np.ndarray:
    e = np.frombuffer(exponent_bytes, np.float32).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bound = np.where(e > 0, np.exp2(SURE_UNDERFLOW_LOG2 / np.where(e > 0, e, 1.0)), 0.0)
    # rounded down in float32, then one step more: the bound's own float64 rounding is far inside that
    out = np.nextafter(np.nextafter(bound, 0.0).astype(np.float32), np.float32(0.0))
    out = np.where(np.isfinite(out) & (out > 0), out, np.float32(0.0)).astype(np.float32)
    out.flags.writeable = False
    return out


def pack_points(
    direction: np.ndarray,
    idx: np.ndarray,
    measured: np.ndarray,
    intensity: np.ndarray,
    reflectivity: np.ndarray,
    ring: np.ndarray,
    t_ns: np.ndarray,
    return_id: np.ndarray,
    flags: np.ndarray,
    segment: np.ndarray,
) -> np.ndarray | None:
    """The structured points (:data:`~rt_lidar.points.POINT_DTYPE`) of detections ``idx`` (pulses):
    x, y, z = ``direction[idx] * measured`` in float32, ``ring`` and ``t_ns`` taken at ``idx``, the other
    fields as given (cast to the point type's fields). None when the compiled step is off."""
    if not available() or direction.dtype != np.float32 or direction.ndim != 2 or direction.shape[1] != 3:
        return None
    m = idx.shape[0]
    out = np.empty(m, POINT_DTYPE)
    _c.pack_points(
        out.view(np.uint8),
        _POINT_OFFSETS,
        POINT_DTYPE.itemsize,
        np.ascontiguousarray(direction),
        np.ascontiguousarray(idx, np.int64),
        np.ascontiguousarray(measured, np.float32),
        np.ascontiguousarray(intensity, np.float32),
        np.ascontiguousarray(reflectivity, np.float32),
        np.ascontiguousarray(ring, np.uint16),
        np.ascontiguousarray(t_ns, np.int64),
        np.ascontiguousarray(return_id, np.uint8),
        np.ascontiguousarray(flags, np.uint8),
        np.ascontiguousarray(segment, np.uint32),
    )
    if POINT_DTYPE["flags"].itemsize > 1:  # the step writes the low byte (the physics' flags are uint8)
        out["flags"] = flags
    return out


def _f64(a: Any, n: int) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == np.float64 and a.shape == (n,) and a.flags.c_contiguous


def detect(
    power: np.ndarray,
    sigma: np.ndarray,
    rng: np.random.Generator,
    shot_w: float,
    threshold_w: float,
    range_m: np.ndarray,
    range_min_m: float,
    range_max_m: float,
) -> np.ndarray | None:
    """The pulses that :meth:`EchoModel.detected` detects (its draw of one standard normal a pulse from
    ``rng``, made here) and whose range lies in [min, max] (float32 compares), ascending. None, with
    nothing drawn, when the inputs are not the arrays the compiled step takes."""
    n = power.shape[0] if isinstance(power, np.ndarray) else -1
    if not (available() and _f32(power, n) and _f32(range_m, n) and _f64(sigma, n)):
        return None
    z = normals.standard_normal(rng, n)
    idx = np.empty(n, np.int64)
    m = _c.detect(
        np.ascontiguousarray(power),
        sigma,
        z,
        float(shot_w),
        float(threshold_w),
        np.ascontiguousarray(range_m),
        float(range_min_m),
        float(range_max_m),
        idx,
    )
    return idx[:m]


def range_noise(
    range_m: np.ndarray,
    standard_normal: np.ndarray,
    power_w: np.ndarray,
    sigma: np.ndarray,
    pulse: np.ndarray,
    shot_w: float,
    accuracy_m: float,
    pulse_sigma_ns: float,
) -> np.ndarray | None:
    """The measured ranges (float32) as :func:`kernels.apply_range_noise` gives them with the noise floor
    ``receiver_sigma_w(sigma[pulse], shot_w, power_w)``, clipped at 0. None when off."""
    m = range_m.shape[0] if isinstance(range_m, np.ndarray) else -1
    if not (
        available()
        and _f32(range_m, m)
        and _f32(standard_normal, m)
        and _f32(power_w, m)
        and isinstance(sigma, np.ndarray)
        and sigma.dtype == np.float64
        and sigma.ndim == 1
    ):
        return None
    out = np.empty(m, np.float32)
    _c.range_noise(
        np.ascontiguousarray(range_m),
        np.ascontiguousarray(standard_normal),
        np.ascontiguousarray(power_w),
        np.ascontiguousarray(sigma),
        np.ascontiguousarray(pulse, np.int64),
        float(shot_w),
        accuracy_m * accuracy_m,
        0.5e-9 * SPEED_OF_LIGHT * pulse_sigma_ns,
        out,
    )
    return out


def detections(
    model: EchoModel,
    idx: np.ndarray,
    range_m: np.ndarray,
    power: np.ndarray,
    segment: np.ndarray,
    flags: np.ndarray,
    path: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(range, power, measured reflectivity, segment, flags)`` of the detected pulses ``idx``, as
    ``SensorPhysics._single`` takes them (:meth:`EchoModel.measured_reflectivity`; ``path``: the
    model's path factor at ``range_m[idx]`` where the caller has it). None when off."""
    n = range_m.shape[0] if isinstance(range_m, np.ndarray) else -1
    if not (
        available()
        and _f32(range_m, n)
        and _f32(power, n)
        and isinstance(segment, np.ndarray)
        and segment.dtype == np.uint32
        and segment.shape == (n,)
        and isinstance(flags, np.ndarray)
        and flags.dtype == np.uint8
        and flags.shape == (n,)
    ):
        return None
    m = idx.shape[0]
    idx64 = np.ascontiguousarray(idx, np.int64)
    if path is None:
        path = model.path_factor(np.take(range_m, idx64))
    trans = np.ascontiguousarray(path, np.float32)
    p = model.preset
    out = (
        np.empty(m, np.float32),
        np.empty(m, np.float32),
        np.empty(m, np.float32),
        np.empty(m, np.uint32),
        np.empty(m, np.uint8),
    )
    _c.select(
        idx64,
        np.ascontiguousarray(range_m),
        np.ascontiguousarray(power),
        np.ascontiguousarray(segment),
        np.ascontiguousarray(flags),
        trans,
        sensor_constant(p.pulse.peak_power_w, p.optics.receiver_aperture_m, p.optics.system_efficiency),
        *out,
    )
    return out


def coat_apply(
    materials: MaterialArrays, cos_i: Any, material: Any, power: Any, refl: Any
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`rt_lidar.physics.clear_coat.coat_apply`'s new ``(power, refl)`` in one pass (the coat's
    table lookup and both products), or None when off, no material has a coat, the batch is empty, the
    arrays are not the types it takes (float32 cosines, power and reflectance, int16 materials) or a
    material is past the table (NumPy's indexing raises there)."""
    if not available() or materials.coat_index is None or not isinstance(cos_i, np.ndarray):
        return None
    n = cos_i.shape[0]
    if not (
        n > 0
        and _f32(cos_i, n)
        and _f32(power, n)
        and _f32(refl, n)
        and isinstance(material, np.ndarray)
        and material.dtype == np.int16
        and material.shape == (n,)
    ):
        return None
    table = np.ascontiguousarray(coat_table(*paint_params(materials)), np.float32)
    out = np.empty(n, np.float32), np.empty(n, np.float32)
    ok = _c.coat(
        np.ascontiguousarray(cos_i),
        np.ascontiguousarray(material),
        table,
        table.shape[0],
        table.shape[1] - 1,
        np.ascontiguousarray(power),
        np.ascontiguousarray(refl),
        *out,
    )
    return out if ok else None


def peak_scale(preset: SensorPreset, range_m: Any, cos_i: Any, power: Any) -> bool:
    """``power *= pulse_spread.peak_factor(preset, range_m, cos_i)`` in one pass (float32, in place):
    True, or False (nothing done) when off or the arrays are not 1-D float32 NumPy arrays of one size
    with ``power`` writable and contiguous."""
    if not available() or not isinstance(power, np.ndarray):
        return False
    n = power.shape[0]
    if not (_f32(range_m, n) and _f32(cos_i, n) and _f32(power, n)):
        return False
    if not (power.flags.c_contiguous and power.flags.writeable):
        return False
    k = float(peak_factor_k(preset))
    _c.peak_scale(
        np.ascontiguousarray(range_m), np.ascontiguousarray(cos_i), power, k, float(np.float32(MIN_COS))
    )
    return True
