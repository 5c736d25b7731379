"""Type stub of the compiled physics steps (``_fused.c``)."""

from typing import Any

def echo_power(*args: Any) -> None:
    """EchoModel.power (and object_echoes' mask and flags) of every ray in one pass: range, cos,
    material, extra_t, trans0, the five material tables, the two underflow tables, k, power, refl,
    glass_material (or None), flags (or None), through_glass."""

def pack_points(out: Any, offsets: tuple[int, ...], itemsize: int, *arrays: Any) -> None:
    """SensorPhysics.apply's structured points in one pass."""

def detect(
    power: Any,
    sigma: Any,
    z: Any,
    shot: float,
    threshold: float,
    range_m: Any,
    lo: float,
    hi: float,
    idx: Any,
    /,
) -> int:
    """The detected pulses within the range limits, written to idx; returns how many."""

def range_noise(
    range_m: Any, n: Any, power: Any, sigma: Any, pulse: Any, shot: float, acc2: float, k: float, out: Any, /
) -> None:
    """The measured ranges with range noise."""

def select(
    idx: Any,
    range_m: Any,
    power: Any,
    segment: Any,
    flags: Any,
    trans: Any,
    k: float,
    range_out: Any,
    power_out: Any,
    refl_out: Any,
    segment_out: Any,
    flags_out: Any,
    /,
) -> None:
    """The detections' rows and their measured reflectivity."""

def powf_array(c: Any, e: Any, out: Any, /) -> None:
    """The C library's powf, element by element."""

def lobe_rays(
    cos: Any,
    material: Any,
    gain: Any,
    exponent: Any,
    zero_below: Any,
    idx: Any,
    cos_out: Any,
    exponent_out: Any,
    /,
) -> int:
    """The rays whose lobe power NumPy is asked for (the lobe's material, no sure underflow): their
    indices, clipped cosines and exponents written in ray order; returns how many."""

def coat(
    cos_i: Any,
    material: Any,
    table: Any,
    m: int,
    steps: int,
    power: Any,
    refl: Any,
    power_out: Any,
    refl_out: Any,
    /,
) -> bool:
    """power and reflectance times the clear coat's factor; False: a material past the table."""

def peak_scale(range_m: Any, cos_i: Any, power: Any, k: float, min_cos: float, /) -> None:
    """power times pulse_spread.peak_factor in place (see the source)."""
