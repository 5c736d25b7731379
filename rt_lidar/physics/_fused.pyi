"""Type stub of the compiled physics steps (``_fused.c``)."""

from typing import Any

def echo_power(
    range_m: Any,
    cos: Any,
    material: Any,
    extra_t: Any,
    trans0: Any,
    diffuse: Any,
    retro_gain: Any,
    retro_exponent: Any,
    specular_gain: Any,
    specular_exponent: Any,
    retro_zero: Any,
    specular_zero: Any,
    k: float,
    power: Any,
    refl: Any,
    glass_material: Any,
    flags: Any,
    through_glass: int,
    /,
) -> None:
    """EchoModel.power (and object_echoes' mask and flags) of every ray in one pass."""

def pack_points(out: Any, offsets: tuple[int, ...], itemsize: int, *arrays: Any) -> None:
    """SensorPhysics.apply's structured points in one pass."""
