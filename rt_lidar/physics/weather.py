"""Weather as the sensor sees it: the :class:`WeatherConfig` of a scenario and the :class:`WeatherModel`
that applies rain, fog and snow to one batch of rays (physics in :mod:`rt_lidar.kernels.weather`).

The model runs inside :meth:`rt_lidar.physics.model.SensorPhysics.apply`, after the received power of every
ray is known and before the detection threshold: it attenuates each object's return, replaces a ray's
return by a rain-drop, snowflake or fog point where that echo is stronger and above the threshold, and
adds the extra range noise of precipitation. The sensor-side numbers come from the preset (peak power,
aperture, efficiency, divergence, pulse width, threshold, range limits); the few it does not hold are
the module constants below.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.kernels import weather as kw
from rt_lidar.kernels import weather_rays
from rt_lidar.kernels.intensity import SPEED_OF_LIGHT, sensor_constant
from rt_lidar.kernels.xp import array_module
from rt_lidar.physics.drop_backscatter import drop_cross_section
from rt_lidar.physics.particle_receiver import ReceiverOptics, kernel_power_model, particle_table
from rt_lidar.physics.rain_dsd import rain_distribution
from rt_lidar.physics.rain_receiver import DROP_D_MIN_MM
from rt_lidar.physics.receiver_range import range_exponent
from rt_lidar.physics.snowflake import SNOWFLAKE_D_MM, snowflake_cross_section
from rt_lidar.points import PointFlag
from rt_lidar.schema import check_fields, spec
from rt_lidar.sensor.presets import CLEAR_AIR_EXTINCTION_PER_M, SensorPreset

__all__ = [
    "AIRSIM_FOG",
    "AIRSIM_RAIN",
    "AIRSIM_ROAD_WETNESS",
    "AIRSIM_SNOW",
    "BEAM_EXIT_DIAMETER_M",
    "OVERLAP_FULL_M",
    "OVERLAP_START_M",
    "PARTICLE_POWER_OVERLAP",
    "RECEIVER_FOV_OVER_DIVERGENCE",
    "RECEIVER_GAP_M",
    "RHO_RAIN_DROP",
    "WEATHER_LIMITS",
    "WeatherConfig",
    "WeatherModel",
    "airsim_weather_to_config",
    "particle_full_overlap_m",
    "rain_drop_counts",
    "receiver_gain_law",
    "receiver_geometry",
    "weather_model",
    "window_draw_gain",
]

BEAM_EXIT_DIAMETER_M = 0.011
"""Beam diameter at the exit window (VLP-16 manual: about 12.7 mm x 9.5 mm; equal-area 11 mm)."""
OVERLAP_START_M, OVERLAP_FULL_M = 1.5, 6.0
"""Where the receiver's field of view starts to / fully covers the beam (Hahner's R_1, R_2; "R_2 < 10 m
in most sensor systems"): echoes from closer than that are weakened, as for a biaxial spinning lidar.
Chosen so that fog clutter starts near 500 m visibility on a VLP-16 (see docs of :mod:`kernels.weather`)."""
RHO_RAIN_DROP = 0.0141
"""The single drop reflectance issue 14 fitted to Linnhoff et al.'s VLP-16 rain rate (Sensors 22(14)
5266, 2022), kept for reference: since issue 40 a drop's backscatter comes from its size and the
wavelength (:func:`rt_lidar.physics.drop_backscatter.drop_reflectance`) and the receiver's overlap
(:func:`receiver_geometry`) decides which drops it sees."""
RECEIVER_GAP_M = 0.0
"""Gap between the edges of the transmitted beam at the exit (``beam_exit_diameter_m``) and of the
receiver's aperture (``receiver_aperture_m``) of a biaxial spinning lidar whose lenses sit side by side:
the baseline between the two parallel axes is ``(d0 + D_r) / 2 + gap`` where a preset gives no
``optics.receiver_baseline_m``. Not published for any preset: the VLP-16's fitted baseline (18 mm,
``sensor_presets/vlp-16.toml``, fitted to Linnhoff et al.'s rain rate and rain-point ranges with the
receiver of :mod:`rt_lidar.physics.particle_receiver`; docs/rain.md) less its lens radii (was 15.3 mm
with the binary overlap)."""
RECEIVER_FOV_OVER_DIVERGENCE = 2.31
"""Full angle of the receiver's field of view over the beam's equal-area divergence
``sqrt(theta_h theta_v)`` where a preset gives no ``optics.receiver_fov_mrad``: the VLP-16's fitted
4.9 mrad over its 2.12 mrad (was 2.0 with the binary overlap, 0.707 before)."""
PARTICLE_POWER_OVERLAP = (0.0, 1e-6)
"""(r1, r2) of the kernels' power overlap for particles before issue 40's third pass: none. Now r1 = 0
and r2 = :func:`particle_full_overlap_m`, so that the kernels draw near particles with the weak echo
the receiver's near field gives them (:mod:`rt_lidar.physics.particle_receiver`)."""
RANGE_NOISE_M_PER_MM_H = 5e-4
"""Extra range noise (1 sigma) per mm/h of precipitation: 2.5 cm at 50 mm/h, on top of the SNR-driven
noise of the physics stage (which grows by itself as extinction weakens the return)."""

# AirSim's WeatherParameter enum (Rain = 0, Roadwetness = 1, Snow = 2, ..., Fog = 7, Enabled = 8)
AIRSIM_RAIN, AIRSIM_ROAD_WETNESS, AIRSIM_SNOW, AIRSIM_FOG = 0, 1, 2, 7
AIRSIM_RAIN_MAX_MM_H = 50.0  # Rain 1.0 = 50 mm/h (violent rain), linear
AIRSIM_SNOW_MAX_MM_H = 5.0  # Snow 1.0 = 5 mm/h water equivalent (heavy snow), linear
AIRSIM_FOG_VIS_M = (1000.0, 20.0)  # Fog f in (0, 1]: V = 1000 m * (20 / 1000)^f (0.5 -> 141 m)

WEATHER_LIMITS = {
    "rain_mm_h": (0.0, 200.0),
    "fog_visibility_m": (10.0, 100_000.0),
    "snow_mm_h": (0.0, 20.0),
    "road_wetness": (0.0, 1.0),
}


@dataclass(frozen=True)
class WeatherConfig:
    """Rain rate and snowfall rate (mm/h, water equivalent), fog visibility (m, None = no fog) and the
    road's wetness (0 dry .. 1 a continuous water film: :mod:`rt_lidar.physics.wet_road`, and the tyre
    spray of moving cars, :mod:`rt_lidar.physics.spray`)."""

    rain_mm_h: float = spec(0.0, *WEATHER_LIMITS["rain_mm_h"], "mm/h")
    fog_visibility_m: float | None = spec(None, *WEATHER_LIMITS["fog_visibility_m"], "m")
    snow_mm_h: float = spec(0.0, *WEATHER_LIMITS["snow_mm_h"], "mm/h")
    road_wetness: float = spec(0.0, *WEATHER_LIMITS["road_wetness"], "")

    def __post_init__(self) -> None:
        check_fields(self, "weather")  # a ConfigError naming the field; numbers stored as float

    @property
    def is_clear(self) -> bool:
        """True when no rain, snow or fog is set and the road is dry."""
        return self.is_clear_air and self.road_wetness == 0

    @property
    def is_clear_air(self) -> bool:
        """True when no rain, snow or fog is set (the road may still be wet)."""
        return self.rain_mm_h == 0 and self.snow_mm_h == 0 and self.fog_visibility_m is None

    @property
    def extinction_per_m(self) -> float:
        """Weather extinction (1/m) of rain, snow and fog together (two-way: exp(-2 a R))."""
        return (
            kw.rain_extinction(self.rain_mm_h)
            + kw.snow_extinction(self.snow_mm_h)
            + kw.fog_extinction(self.fog_visibility_m)
        )


def receiver_geometry(preset: SensorPreset) -> tuple[float, float]:
    """(baseline m, field of view rad) of ``preset``'s receiver beside its transmitter: the preset's
    ``optics.receiver_baseline_m`` / ``receiver_fov_mrad`` where it gives them, else derived from its
    exit beam, aperture and divergence (:data:`RECEIVER_GAP_M`, :data:`RECEIVER_FOV_OVER_DIVERGENCE`)."""
    o = preset.optics
    baseline = o.receiver_baseline_m
    if baseline is None:
        baseline = (o.beam_exit_diameter_m + o.receiver_aperture_m) / 2.0 + RECEIVER_GAP_M
    fov_mrad = o.receiver_fov_mrad
    if fov_mrad is None:
        divergence = math.sqrt(o.beam_divergence_h_mrad * o.beam_divergence_v_mrad)
        fov_mrad = RECEIVER_FOV_OVER_DIVERGENCE * divergence
    return float(baseline), float(fov_mrad) * 1e-3


def receiver_optics(preset: SensorPreset) -> ReceiverOptics:
    """``preset``'s transmitter beam and receiver (:func:`receiver_geometry`) for the particle tables."""
    o = preset.optics
    baseline, fov = receiver_geometry(preset)
    filled = None
    if o.beam_exit_h_m is not None and o.beam_exit_v_m is not None:
        filled = (o.beam_exit_h_m, o.beam_exit_v_m)
    return ReceiverOptics(
        o.beam_exit_diameter_m,
        o.beam_divergence_h_mrad * 1e-3,
        o.beam_divergence_v_mrad * 1e-3,
        o.receiver_aperture_m,
        fov,
        baseline,
        gaussian=o.beam_profile == "gaussian",
        focus_m=o.receiver_focus_m,
        filled_exit_m=filled,
    )


def particle_full_overlap_m(rx: ReceiverOptics) -> float:
    """Range (m) from which the receiver's detector takes all the light of a particle on the beam's
    axis (:func:`rt_lidar.physics.particle_receiver.collected_fraction` reaches 1 at ``s = b``).
    Nearer, the share grows about linearly with range over the beam (as ``(theta_r z / D_r)^2`` on the
    receiver's axis): the kernels' particle echo takes that as its linear overlap from 0.

    Focused at infinity the detector's field ``theta_r z / 2`` must reach past the aperture's far edge,
    ``b + D_r / 2``: ``z = (2 b + D_r) / theta_r``. A lens focused at ``F`` (``optics.receiver_focus_m``)
    scales the field's disc and the point's offset by ``F / |F - z|``: before ``F`` the whole aperture is
    taken from ``z = F (2 b + D_r) / (theta_r F + D_r)`` on (sooner than at infinity), and where that
    lies beyond ``F``, from ``F (2 b - D_r) / (theta_r F - D_r)`` (never, where ``theta_r F <= D_r``: the
    range where the share peaks, ``F``, is taken then)."""
    b, d_r, fov = rx.baseline_m, rx.aperture_m, max(rx.fov_rad, 1e-9)
    f = rx.focus_m
    if f is None or not math.isfinite(f):
        return (2.0 * b + d_r) / fov
    near = f * (2.0 * b + d_r) / (fov * f + d_r)
    if near <= f:
        return near
    if fov * f <= d_r:
        return f
    return max(f, f * (2.0 * b - d_r) / (fov * f - d_r))


def receiver_gain_law(preset: SensorPreset) -> tuple[float, float]:
    """(exponent, reference range m) of ``preset``'s receiver range law ``g(R) = (R / R10)^(2 - n)``
    (:mod:`rt_lidar.physics.receiver_range`) for the weather kernels: (0, 1), i.e. g = 1, where the
    preset follows 1/R^2. Drops, flakes and the fog's soft target pass the same receiver as a wall."""
    n = range_exponent(preset)
    r10 = preset.range.range_10pct_m
    if n == 2.0 or r10 is None:
        return 0.0, 1.0
    return 2.0 - n, float(r10)


def rain_drop_counts(rain_mm_h: float) -> tuple[np.ndarray, np.ndarray]:
    """(diameters mm, drops per m^3 in each size step) over which the rain tables sum: 300 sizes from
    :data:`~rt_lidar.physics.rain_receiver.DROP_D_MIN_MM` to the kernels' largest drop, from the Z-R
    drop-size distribution at ``rain_mm_h`` (:func:`rt_lidar.physics.rain_dsd.rain_distribution`)."""
    n0, lam = rain_distribution(rain_mm_h)
    sizes = np.linspace(DROP_D_MIN_MM, kw.RAIN_D_MAX_MM, 300)
    return sizes, n0 * np.exp(-lam * sizes) * (sizes[1] - sizes[0])


def airsim_weather_to_config(params: dict[int, float]) -> WeatherConfig | None:
    """Map AirSim's ``simSetWeatherParameter`` values (0..1, keyed by the WeatherParameter enum) to a
    :class:`WeatherConfig`; None when rain, snow, fog and road wetness are all 0.

    Scale: Rain r -> 50 r mm/h; Snow s -> 5 s mm/h water equivalent; Fog f > 0 -> visibility
    ``1000 m * (20 / 1000)^f`` (f = 0.1: 676 m, 0.5: 141 m, 1: 20 m); Roadwetness w -> road_wetness w.
    Values are clipped to 0..1; the other parameters (leaves, dust, Enabled) do not change the lidar.
    """

    def get(k: int) -> float:
        v = float(params.get(k, 0.0))
        return min(max(v, 0.0), 1.0) if math.isfinite(v) else 0.0

    rain, snow, fog = get(AIRSIM_RAIN), get(AIRSIM_SNOW), get(AIRSIM_FOG)
    wet = get(AIRSIM_ROAD_WETNESS)
    if rain == 0 and snow == 0 and fog == 0 and wet == 0:
        return None
    v_hi, v_lo = AIRSIM_FOG_VIS_M
    vis = v_hi * (v_lo / v_hi) ** fog if fog > 0 else None
    return WeatherConfig(rain * AIRSIM_RAIN_MAX_MM_H, vis, snow * AIRSIM_SNOW_MAX_MM_H, wet)


class WeatherModel:
    """Applies one :class:`WeatherConfig` to batches of rays of any preset (tables cached per sensor)."""

    def __init__(self, config: WeatherConfig) -> None:
        self.config = config
        self._params: dict[tuple[Any, ...], kw.WeatherKernelParams] = {}
        self._presets: dict[int, SensorPreset] = {}  # keeps each keyed preset alive: its id stays its own

    def params(
        self,
        preset: SensorPreset,
        threshold_w: float,
        clear_air_per_m: float = CLEAR_AIR_EXTINCTION_PER_M,
        draw_gain: float = 1.0,
    ) -> kw.WeatherKernelParams:
        """The kernel parameters for ``preset`` at ``threshold_w`` (built once, then cached); with
        ``draw_gain`` > 1 their tables hold the particles whose echo reaches ``threshold_w / draw_gain``
        (what a window gain up to ``draw_gain`` lifts over the threshold: :func:`window_draw_gain`)."""
        key = (preset.name, id(preset), float(threshold_w), float(clear_air_per_m), float(draw_gain))
        if key not in self._params:
            self._presets[id(preset)] = preset
            thr = float(threshold_w)
            if draw_gain == 1.0:
                self._params[key] = self._build(preset, thr, float(clear_air_per_m))
            else:
                drawn = self._build(preset, thr / draw_gain, float(clear_air_per_m))
                self._params[key] = drawn._replace(threshold_w=thr, draw_gain=float(draw_gain))
        return self._params[key]

    def _build(self, preset: SensorPreset, threshold_w: float, a0: float) -> kw.WeatherKernelParams:
        c, o = self.config, preset.optics
        k_sensor = sensor_constant(preset.pulse.peak_power_w, o.receiver_aperture_m, o.system_efficiency)
        a_w = c.extinction_per_m
        a_tot = a0 + a_w
        beam = (o.beam_exit_diameter_m, o.beam_divergence_h_mrad * 1e-3, o.beam_divergence_v_mrad * 1e-3)
        r1, r2 = OVERLAP_START_M, OVERLAP_FULL_M  # the fog's (an extended target's) overlap
        zmin, zmax = preset.range.min_m, preset.range.max_m
        rx = receiver_optics(preset)
        p1, p2 = 0.0, particle_full_overlap_m(rx)  # the near field in the particles' drawn power
        gain = receiver_gain_law(preset)
        sensor = (k_sensor, threshold_w, a_tot, gain)
        species = []
        if c.rain_mm_h > 0:
            n0, lam = rain_distribution(c.rain_mm_h)
            sizes, counts = rain_drop_counts(c.rain_mm_h)
            wl = o.wavelength_nm
            tab = particle_table(zmin, zmax, rx, *sensor, sizes, counts, lambda d: drop_cross_section(d, wl))
            lo, hi = kw.RAIN_D_MIN_MM, kw.RAIN_D_MAX_MM
            rho = kernel_power_model(*tab, lam, lo, hi, *sensor[:3], beam, gain, p2)
            flag = int(PointFlag.RAIN_CLUTTER)
            species.append(kw.Species(n0, lam, lo, hi, rho, flag, kw.SLOT_RAIN, *tab[:3]))
        if c.snow_mm_h > 0:
            n0, lam = kw.snow_distribution(c.snow_mm_h)
            lo, hi = SNOWFLAKE_D_MM
            sizes = np.linspace(lo, hi, 300)
            counts = n0 * np.exp(-lam * sizes) * (sizes[1] - sizes[0])
            tab = particle_table(zmin, zmax, rx, *sensor, sizes, counts, snowflake_cross_section)
            rho = kernel_power_model(*tab, lam, lo, hi, *sensor[:3], beam, gain, p2)
            flag = int(PointFlag.SNOW_CLUTTER)
            species.append(kw.Species(n0, lam, lo, hi, rho, flag, kw.SLOT_SNOW, *tab[:3]))
        pulse_len = SPEED_OF_LIGHT * preset.pulse.width_ns * 1e-9 / 2
        fog_p, fog_z = kw.fog_soft_target(
            k_sensor, c.fog_visibility_m, a_tot, pulse_len, r1, r2, zmin, gain=gain
        )
        return kw.WeatherKernelParams(
            k_sensor=k_sensor,
            threshold_w=threshold_w,
            a_weather=a_w,
            a_total=a_tot,
            d0=beam[0],
            th_h=beam[1],
            th_v=beam[2],
            r1=p1,
            r2=p2,
            species=tuple(species),
            fog=kw.FogParams(fog_p, fog_z, pulse_len),
            noise_sigma_m=RANGE_NOISE_M_PER_MM_H * (c.rain_mm_h + c.snow_mm_h),
            fog_flag=int(PointFlag.FOG_CLUTTER),
            gain_exp=gain[0],
            gain_ref_m=gain[1],
        )

    def apply(
        self,
        range_m: Any,
        power_w: Any,
        flags: Any,
        direction: Any,
        preset: SensorPreset,
        threshold_w: float,
        rng: np.random.Generator,
        *,
        clear_air_per_m: float = CLEAR_AIR_EXTINCTION_PER_M,
        reflectivity: Any = None,
        segment: Any = None,
        echoes: tuple[Any, Any, Any] | None = None,
        kernel: Any = None,
        window: Any = None,
    ) -> None:
        """Apply the weather to one batch in place.

        ``range_m`` (float32, inf = miss), ``power_w`` (float32 W, 0 = miss) and ``flags`` (uint8) are
        changed in place: object returns are attenuated; rays whose clutter echo wins get the clutter's
        range, power and flag (and reflectivity / segment 0 when those arrays are given); detected object
        returns get the extra range noise. ``direction`` (N, 3) is accepted for the interface (the model
        is isotropic). One draw of ``rng`` seeds the counter-based generator, so the same seed gives the
        same output. CuPy arrays run the fused CUDA kernel.

        With ``echoes`` = (range, power, flag) output arrays the clutter is *added* instead: each ray's
        strongest clutter echo is written there (power 0 = none) and the object return is only
        attenuated (:func:`rt_lidar.kernels.weather_rays.apply_weather`'s extra-echo mode). ``kernel``
        launches the CUDA kernel's source another way (its host build on NumPy arrays,
        :mod:`rt_lidar.physics.device`'s ``cuda-host``).

        ``window`` (one per ray, on the arrays' device; None = 1) is each ray's two-way transmission of
        the sensor's own window and its receiver's gain (:attr:`Hits.window_transmission
        <rt_lidar.pipeline.sources.Hits.window_transmission>`, the power faults of
        :mod:`rt_lidar.faults.optical`): the kernels multiply every clutter echo's power by it before the
        threshold and the object's echo (which ``power_w`` already carries dimmed) decide, so a blocked
        window sees no rain and a dirty one dims the drops as it dims a wall.
        """
        del direction
        if self.config.is_clear_air or range_m.shape[0] == 0:
            return
        xp = array_module(range_m)
        if window is not None:
            window = xp.ascontiguousarray(window, dtype=xp.float32)
        prm = self.params(preset, threshold_w, clear_air_per_m, window_draw_gain(window))
        key = int(rng.integers(0, 2**63 - 1))
        refl = reflectivity if reflectivity is not None else xp.zeros(range_m.shape, xp.float32)
        if xp is np and kernel is None:
            clutter = weather_rays.apply_weather(
                range_m, power_w, flags, refl, prm, key, echoes=echoes, window=window
            )
        else:
            from rt_lidar.kernels.weather_cuda import apply_weather_cuda

            clutter = apply_weather_cuda(
                range_m, power_w, flags, refl, prm, key, kernel=kernel, echoes=echoes, window=window
            )
        if segment is not None and echoes is None:
            segment[clutter] = 0


def window_draw_gain(window: Any) -> float:
    """The ``draw_gain`` of the kernel tables a batch of rays with window gains ``window`` needs
    (:meth:`WeatherModel.params`): 1 where none exceeds 1 (a window only dims: the detectable particles
    at the threshold are all the kernels can detect), else the power of two at or above the largest (a
    receiver gain fault above 1 lifts weaker particles over the threshold; powers of two keep the
    tables built few)."""
    if window is None or window.shape[0] == 0:
        return 1.0
    top = float(window.max())
    if not top > 1.0:
        return 1.0
    if not math.isfinite(top):
        raise ValueError(f"a window gain must be finite, got {top}")
    return float(2.0 ** math.ceil(math.log2(top)))


@functools.lru_cache(maxsize=32)
def weather_model(config: WeatherConfig) -> WeatherModel:
    """The shared :class:`WeatherModel` of ``config`` (its tables are built once per sensor)."""
    return WeatherModel(config)
