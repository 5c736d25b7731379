"""Sensor presets: the validated, immutable description of one real sensor.

A preset is data (``sensor_presets/*.toml``, written by ``tools/import_calibrations.py``). Loading checks
every field for type and allowed range or choices; unknown keys are errors, so a typo cannot pass
silently. Defaults of optional fields live here, in the dataclasses, and nowhere else.

Conventions: angles in degrees; ``azimuth_offset_deg`` is in the math convention of the sensor frame
(x forward, y left, counter-clockwise positive seen from above) and adds to the head's azimuth;
rings follow each vendor's own driver (Velodyne ROS: ascending elevation; Ouster and Hesai: channel
order, top beam first), with the vendor's laser id kept in ``laser_id``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import PresetError
from rt_lidar.kernels.intensity import sensor_constant
from rt_lidar.points import POINT_DTYPE
from rt_lidar.schema import build, spec

__all__ = [
    "BEAM_PROFILES",
    "DUAL_KINDS",
    "INTENSITY_KINDS",
    "MAX_SCAN_POINTS",
    "PACKET_FORMATS",
    "PATTERNS",
    "RETURN_MODES",
    "SATURATION_OVER_THRESHOLD",
    "Beam",
    "OpticsSpec",
    "OutputSpec",
    "PulseSpec",
    "RangeSpec",
    "ReceiverSpec",
    "ReturnsSpec",
    "ScanSpec",
    "SensorPreset",
    "lambertian_return_w",
    "list_presets",
    "load_preset",
    "preset_from_dict",
    "preset_to_dict",
]

PATTERNS = ("rotating", "rosette", "raster", "mirror")
PACKET_FORMATS = (
    "velodyne-hdl64",
    "velodyne-vlp16",
    "velodyne-vlp32c",
    "velodyne-hdl32",
    "velodyne-vls128",
    "ouster-legacy",
    "hesai-pandar64",
    "hesai-at128",
    "hesai-xt32",
    "hesai-xt16",
    "hesai-ot128",
    "hesai-pandar40p",
    "hesai-qt64",
    "hesai-qt128",
    "hesai-jt16",
    "robosense-rs16",
    "robosense-rs32",
    "robosense-bp",
    "livox-mid40",
    "blickfeld",
    "valeo-scala",
    "none",
)
RETURN_MODES = ("strongest", "last", "first", "dual", "multi")
DUAL_KINDS = ("strongest_last", "two_strongest")
BEAM_PROFILES = ("gaussian", "top_hat", "table")
INTENSITY_KINDS = ("calibrated_reflectivity", "received_power", "raw_intensity")
CLEAR_AIR_EXTINCTION_PER_M = 1e-4
ELEMENTARY_CHARGE_C = 1.602176634e-19
SATURATION_OVER_THRESHOLD = 5000.0
"""Assumed receiver saturation over the detection threshold when a preset gives none: fitted so the
OS1-64's road-sign sheeting at 20 m reads ~10 cm short (its datasheet: +-10 cm on retro-reflectors
beside +-3 cm on Lambertian targets); docs/range-walk.md."""
NON_PRESET_FILES = frozenset({"materials.toml"})  # other data in the sensor_presets package


@dataclass(frozen=True)
class ScanSpec:
    """How the sensor sweeps: a spinning head or a solid-state pattern and its timing."""

    pattern: str = spec(choices=PATTERNS)
    rotation_hz: float | None = spec(None, unit="Hz")  # checked against rotation_hz_range
    rotation_hz_range: tuple[float, float] = spec((5.0, 20.0), 0.1, 100.0, "Hz")
    columns_per_rev: int | None = spec(None, 1, 100_000)
    firing_cycle_us: float | None = spec(None, 0.01, 100_000.0, "us")
    rotation_direction: str = spec("cw", choices=("cw", "ccw"))
    scan_start_azimuth_deg: float = spec(180.0, -180.0, 360.0, "deg")
    frame_rate_hz: float | None = spec(None, 0.1, 1000.0, "Hz")
    fov_deg: float | None = spec(None, 0.1, 180.0, "deg")
    fov_h_deg: float | None = spec(None, 0.1, 360.0, "deg")
    fov_v_deg: float | None = spec(None, 0.1, 180.0, "deg")
    point_rate_hz: float | None = spec(None, 1.0, 1e8, "Hz")
    prism_rpm: tuple[float, float] | None = spec(None, -100_000.0, 100_000.0, "rpm")
    lines_per_frame: int | None = spec(None, 1, 4096)
    points_per_line: int | None = spec(None, 2, 100_000)
    zigzag: bool = spec(True)
    columns_per_frame: int | None = spec(None, 2, 100_000)
    mirror_fields_deg: tuple[float, ...] | None = spec(None, 0.0, 360.0, "deg")
    """Where each mirror field starts on the mirror's encoder (the AT128's frames, in the order the
    scans use them: scan n the field n mod their count); with the beams' adjust tables."""


# Which scan keys each pattern uses (besides ``pattern``); the first group is required.
_PATTERN_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "rotating": (
        ("rotation_hz",),
        (
            "rotation_hz_range",
            "columns_per_rev",
            "firing_cycle_us",
            "rotation_direction",
            "scan_start_azimuth_deg",
        ),
    ),
    "rosette": (("frame_rate_hz", "fov_deg", "point_rate_hz", "prism_rpm"), ()),
    "raster": (
        ("frame_rate_hz", "fov_h_deg", "fov_v_deg", "lines_per_frame", "points_per_line"),
        ("zigzag",),
    ),
    "mirror": (
        ("frame_rate_hz", "fov_h_deg", "fov_v_deg", "columns_per_frame"),
        ("rotation_direction", "mirror_fields_deg"),
    ),
}


@dataclass(frozen=True)
class RangeSpec:
    """Range limits and noise."""

    max_m: float = spec(lo=0.1, hi=10_000.0, unit="m")
    min_m: float = spec(0.5, 0.0, 100.0, "m")
    accuracy_m: float = spec(0.03, 0.0, 10.0, "m")
    range_10pct_m: float | None = spec(None, 0.1, 10_000.0, "m")
    """Datasheet range of a 10 % Lambertian target: sets the detection threshold."""
    range_80pct_m: float | None = spec(None, 0.1, 10_000.0, "m")
    """Datasheet range of an 80 % target, where the datasheet gives one: with ``range_10pct_m`` it fits
    the receiver's range law (:mod:`rt_lidar.physics.receiver_range`); None = the radar equation's 1/R^2."""


@dataclass(frozen=True)
class OpticsSpec:
    """Transmitter and receiver optics."""

    wavelength_nm: float = spec(905.0, 200.0, 2000.0, "nm")
    beam_divergence_h_mrad: float = spec(3.0, 0.0, 100.0, "mrad")
    beam_divergence_v_mrad: float = spec(1.5, 0.0, 100.0, "mrad")
    beam_profile: str = spec("gaussian", choices=BEAM_PROFILES)
    """Transmitter x receiver sensitivity over the footprint: a Gaussian whose 1/e^2 full angles are the
    divergences, a top hat of those full angles, or a measured ``table``."""
    beam_exit_diameter_m: float = spec(0.011, 0.0, 0.2, "m")
    """Beam diameter at the exit window: the footprint at range R is this plus the divergence x R, and
    sub-rays start across it (:func:`~rt_lidar.sensor.beam.exit_offsets`)."""
    beam_exit_h_m: float | None = spec(None, 1e-4, 0.2, "m")
    """Width of the exit aperture the beam fills evenly, horizontally (along the lenses' baseline); with
    ``beam_exit_v_m`` the rain and snow tables light that rectangle and spread each point of it with
    the divergences (:mod:`rt_lidar.physics.particle_receiver`). None: the Gaussian of ``d0 + theta z``."""
    beam_exit_v_m: float | None = spec(None, 1e-4, 0.2, "m")
    """Width of that exit aperture vertically (across the baseline); given with ``beam_exit_h_m``."""
    receiver_aperture_m: float = spec(0.025, 0.001, 1.0, "m")
    receiver_focus_m: float | None = spec(None, 0.5, 1000.0, "m")
    """Distance the receiver lens is focused at: nearer echoes blur on the detector and lose power
    (:mod:`rt_lidar.physics.receiver_focus`). None: focused at infinity (no loss, unless
    ``receiver_near_field``: then the near field's parallax alone). The default of the
    beams' own ``receiver_focus_m``."""
    receiver_fov_mrad: float | None = spec(None, 0.05, 100.0, "mrad")
    """Full angle of the receiver's field of view (its detector over its focal length); None: derived
    from the beam's divergence (:func:`rt_lidar.physics.weather.receiver_optics`). Decides which rain
    drops and snowflakes the receiver sees near the sensor (docs/rain.md)."""
    receiver_baseline_m: float | None = spec(None, 0.0, 0.5, "m")
    """Distance between the transmitter's and the receiver's optical axes (lenses side by side); None:
    derived from the exit beam and the aperture (:func:`rt_lidar.physics.weather.receiver_optics`)."""
    receiver_near_field: bool = spec(False)
    """Hard targets pass the same receiver as rain and snow (field, baseline, aperture; focused at
    infinity where ``receiver_focus_m`` is unset): near echoes lose the biaxial head's near-field share
    (:mod:`rt_lidar.physics.receiver_focus`). A preset with ``receiver_focus_m`` does so already."""
    system_efficiency: float = spec(0.5, 0.0, 1.0)
    sub_rays: int = spec(1, 1, 127)
    """Rays cast per pulse over the footprint (1 = the nominal direction only)."""
    footprint_extent: float = spec(1.5, 0.1, 5.0)
    """Radius of the outer sub-ray ring, in 1/e^2 half-divergences (Gaussian) or half-widths."""
    beam_profile_h_mrad: tuple[float, ...] | None = spec(None, -100.0, 100.0, "mrad")
    """Measured profile: ascending horizontal angles of the table's columns."""
    beam_profile_v_mrad: tuple[float, ...] | None = spec(None, -100.0, 100.0, "mrad")
    """Measured profile: ascending vertical angles of the table's rows."""
    beam_profile_table: tuple[float, ...] | None = spec(None, 0.0, 1e12)
    """Measured profile, row-major (len(v) rows x len(h) columns), any positive scale."""
    filter_bandwidth_nm: float = spec(30.0, 0.1, 500.0, "nm")
    """Optical band-pass of the receiver: how much sunlight reaches the detector."""
    sun_blinding_deg: float = spec(2.0, 0.0, 45.0, "deg")
    """Within this angle of the sun the receiver is blinded (stray light saturates it)."""


@dataclass(frozen=True)
class ReceiverSpec:
    """The receiver's noise (:mod:`rt_lidar.kernels.ambient`), in optical watts at the detector:
    ``sigma^2 = (T / threshold_snr)^2 + 2 q F B (P_b + P_s) / R``: the dark floor (amplifier and dark
    current) that puts the detection threshold ``T`` at ``threshold_snr`` of it, plus the shot noise of
    the background (sunlight) and signal photocurrent, multiplied by the APD's excess noise factor."""

    responsivity_a_w: float = spec(0.55, 0.001, 2.0, "A/W")
    """Unity-gain responsivity at the wavelength (Si at 905 nm ~0.55; a SPAD: PDE x q / (h nu))."""
    excess_noise_factor: float = spec(4.0, 1.0, 100.0)
    """APD excess noise factor F at its working gain (Si ~3-5 at M ~100; 1 = no multiplication noise)."""
    bandwidth_hz: float = spec(80e6, 1e5, 1e11, "Hz")
    """Electrical noise bandwidth of the receiver (~0.44 / pulse FWHM for a matched filter)."""
    threshold_snr: float = spec(5.0, 1.0, 50.0)
    """Detection threshold over the dark noise (1 sigma): sets the false-alarm rate at night."""
    saturation_w: float | None = spec(None, 1e-15, 1e3, "W")
    """Echo power (W at the detector) where the receiver's amplitude measurement saturates, so its range
    walk correction stops (:func:`rt_lidar.kernels.intensity.leading_edge_walk_m`). None: an assumption,
    :data:`SATURATION_OVER_THRESHOLD` times the detection threshold (see docs/range-walk.md)."""
    photon_floor_counts: float | None = spec(None, 1e-3, 1e6)
    """A photon-counting receiver (SPAD): its noise floor (counts, 1 sigma) with no background light.
    Set, the threshold is a constant false-alarm-rate one over the scene's ambient light
    (:mod:`rt_lidar.physics.ambient_threshold`): ``pulse.detection_threshold_w`` holds at
    ``datasheet_ambient_lux`` and falls with less light. None: a fixed threshold."""
    datasheet_ambient_lux: float = spec(0.0, 0.0, 200_000.0, "lx")
    """Ambient light in which the datasheet's range figures were measured (Ouster: 100 klx sunlight)."""
    laser_gain_spread: float = spec(0.0, 0.0, 2.0)
    """How much the unit's lasers differ in sensitivity (transmit power x receiver gain): the standard
    deviation of the natural log of each laser's gain on its echo power, drawn once per unit from
    ``laser_unit_seed`` (:mod:`rt_lidar.physics.laser_gain`); beams with their own ``laser_gain`` keep
    it. 0: every laser alike."""
    laser_unit_seed: int = spec(0, 0, 2**63 - 1)
    """Which unit ``laser_gain_spread`` draws: the same seed gives the same lasers, whatever the run's
    seed (a run's seed changes its noise, not its hardware)."""

    def saturation(self, threshold_w: float) -> float:
        """The saturation power (W): ``saturation_w``, or the assumed default over ``threshold_w``."""
        return self.saturation_w if self.saturation_w is not None else SATURATION_OVER_THRESHOLD * threshold_w

    def dark_sigma_w(self, threshold_w: float) -> float:
        """The dark noise floor (W, 1 sigma)."""
        return threshold_w / self.threshold_snr

    @property
    def shot_w(self) -> float:
        """``2 q F B / R`` (W): the shot-noise variance per watt of detected optical power."""
        return (
            2.0 * ELEMENTARY_CHARGE_C * self.excess_noise_factor * self.bandwidth_hz / self.responsivity_a_w
        )


@dataclass(frozen=True)
class PulseSpec:
    """Emitted pulse and the receiver's detection threshold."""

    width_ns: float = spec(5.0, 0.1, 1000.0, "ns")
    peak_power_w: float = spec(30.0, 1e-3, 1e5, "W")
    detection_threshold_w: float = spec(5e-9, 1e-15, 1.0, "W")
    epw_offset_ns: float = spec(0.0, -100.0, 1000.0, "ns")
    """Echo pulse width = time the echo stays above the threshold plus this electronics offset."""
    receiver_response_ns: float = spec(0.0, 0.0, 1000.0, "ns")
    """FWHM of the receiver's impulse response (its filter or the DSP's integration of the digitised
    waveform), Gaussian: the echo it thresholds is the optical echo convolved with it, so an echo
    broadened over a slanted footprint loses less of its filtered peak
    (:func:`~rt_lidar.physics.pulse_spread.peak_factor`). 0 = the optical echo's peak is thresholded."""


@dataclass(frozen=True)
class OutputSpec:
    """What the sensor reports as intensity."""

    intensity: str = spec("calibrated_reflectivity", choices=INTENSITY_KINDS)
    intensity_max: int = spec(255, 1, 2**32 - 1)
    diffuse_max: int | None = spec(None, 1, 2**32 - 1)
    raw_gain: float | None = spec(None, 1e-6, 1e9)
    """``raw_intensity`` output (an uncalibrated reading, the HDL-64E S2's 8-bit intensity): the reading per
    unit of measured reflectivity (a white Lambertian target square on would read it), linear and clipped
    at intensity_max, with no calibrated scale for retro-reflectors (required for that kind)."""
    raw_knee: float | None = spec(None, 1.0, 2**32 - 1)
    """``raw_intensity`` output: the reading above which it compresses toward intensity_max (slope 1 at the
    knee, approaching intensity_max exponentially: :func:`rt_lidar.kernels.intensity.raw_intensity_output`;
    None: linear up to intensity_max)."""
    raw_step: float | None = spec(None, 1e-3, 1e6)
    """``calibrated_reflectivity`` output: the step, in calibrated units, of the coarser raw reading that
    each laser's on-board table maps to calibrated reflectivity (the mean over the lasers; diffuse
    values read ``round(x / step) step``: :func:`rt_lidar.kernels.intensity.raw_reading_lookup`; None:
    the calibrated value is continuous before the reporting step)."""
    raw_step_spread: float = spec(0.0, 0.0, 0.9)
    """``calibrated_reflectivity`` output with ``raw_step``: each laser's step is ``raw_step`` times
    ``1 + spread (2 u - 1)`` (u evenly spread over the lasers:
    :func:`rt_lidar.physics.intensity_chain.laser_table_steps`), as each laser has its own table."""
    intensity_step: float = spec(1.0, 0.0, 1e6)
    """The reporting step of intensity: reported values are whole multiples of it (Velodyne's 8-bit
    intensity and Ouster's photon counts: 1; 0 = a continuous value)."""
    weak_zero_snr: float = spec(0.0, 0.0, 1e6)
    """Returns whose measured amplitude is below this multiple of the detection threshold report
    intensity 0 (KITTI's HDL-64E S2 reports about half of its returns beyond 40 m as 0: its 8-bit
    intensity subtracts a range-dependent offset and clips; 0 = never)."""
    saturation_counts: float | None = spec(None, 1.0, 1e9)
    """``received_power`` output: the photon-counting receiver's compression, counts ``x`` (proportional
    to power) reported as ``x / (1 + x / N)`` (a SPAD array's dead time: counts approach N, never clip;
    None = linear up to intensity_max)."""
    counts_at_threshold: float = spec(10.0, 1e-3, 1e6)
    """``received_power`` output: counts of an echo at the detection threshold (the photons a count)."""
    near_field_m: float | None = spec(None, 0.01, 1000.0, "m")
    """``received_power`` output: the signal of a return at range R is scaled by ``1 - exp(-(R / R0)^2)``
    (the transmitter and receiver fields of view overlap fully only beyond ~R0; None = 1)."""


@dataclass(frozen=True)
class ReturnsSpec:
    """Return modes the sensor offers."""

    modes: tuple[str, ...] = spec(("strongest",), choices=RETURN_MODES)
    default: str = spec("strongest", choices=RETURN_MODES)
    min_separation_m: float = spec(1.0, 0.0, 100.0, "m")
    dual: str = spec("strongest_last", choices=DUAL_KINDS)
    """What ``dual`` reports: strongest + last (Velodyne, Hesai) or the two strongest (Ouster)."""
    max_returns: int = spec(3, 1, 8)
    """Returns per pulse in ``multi`` mode (up to N, nearest first)."""


@dataclass(frozen=True)
class Beam:
    """One laser channel: its ring, direction offsets and firing time within the firing cycle."""

    ring: int = spec(lo=0, hi=4095)
    elevation_deg: float = spec(lo=-90.0, hi=90.0, unit="deg")
    azimuth_offset_deg: float = spec(0.0, -180.0, 180.0, "deg")
    firing_offset_us: float = spec(0.0, 0.0, 1e6, "us")
    laser_id: int | None = spec(None, 0, 4095)
    dist_correction_m: float | None = spec(None, -100.0, 100.0, "m")
    dist_correction_x_m: float | None = spec(None, -100.0, 100.0, "m")
    dist_correction_y_m: float | None = spec(None, -100.0, 100.0, "m")
    vert_offset_correction_m: float | None = spec(None, -10.0, 10.0, "m")
    horiz_offset_correction_m: float | None = spec(None, -10.0, 10.0, "m")
    focal_distance: float | None = spec(None, -1e4, 1e4)
    focal_slope: float | None = spec(None, -1e4, 1e4)
    receiver_focus_m: float | None = spec(None, 0.1, 1000.0, "m")
    """Distance this laser's receiver is focused at (a Velodyne calibration's ``focal_distance`` where it
    gives one; :mod:`rt_lidar.physics.receiver_focus`); unset: ``optics.receiver_focus_m``."""
    laser_gain: float | None = spec(None, 0.01, 100.0)
    """This laser's sensitivity against the preset's (its transmit power x receiver gain, a factor on its
    echo power: :mod:`rt_lidar.physics.laser_gain`); unset: drawn from ``receiver.laser_gain_spread``
    (1 where that is 0)."""
    origin_radial_m: float | None = spec(None, -1.0, 1.0, "m")
    """Where the beam starts, off the sensor axis, in the head's frame at the column's azimuth (the
    firing's azimuth less this beam's ``azimuth_offset_deg``): out along that azimuth, ..."""
    origin_lateral_m: float | None = spec(None, -1.0, 1.0, "m")
    """... 90 deg counter-clockwise from it (seen from above), ..."""
    origin_up_m: float | None = spec(None, -1.0, 1.0, "m")
    """... and up. Unset: the beam starts on the axis (Ouster's beam origins, Velodyne's offsets)."""
    azimuth_adjust_deg: tuple[float, ...] | None = spec(None, -10.0, 10.0, "deg")
    """A mirror sensor's (the AT128's) azimuth adjustment, in Hesai's sense (clockwise), at each 2 deg
    of the mirror's encoder from 0 (its ``.dat`` file's table); unset: none."""
    elevation_adjust_deg: tuple[float, ...] | None = spec(None, -10.0, 10.0, "deg")
    """... and its elevation adjustment (up positive), at the same encoder angles."""
    firing_state_offsets_us: tuple[float, ...] | None = spec(None, -1.0, 1e6, "us")
    """A rotating sensor whose firing depends on the column's azimuth state (the OT128's firetime
    file): the beam's firing offset in each state (column k of the rotation is in state k mod their
    count), -1 where the beam does not fire in that state; unset: ``firing_offset_us`` in every column."""


@dataclass(frozen=True)
class SensorPreset:
    """A whole sensor: identity, scan, range, optics, pulse, output, returns and the beam table."""

    name: str
    vendor: str
    model: str
    source: str
    packet_format: str = field(metadata={"lo": None, "hi": None, "unit": "", "choices": PACKET_FORMATS})
    scan: ScanSpec
    range: RangeSpec
    beams: tuple[Beam, ...]
    optics: OpticsSpec = field(default_factory=OpticsSpec)
    pulse: PulseSpec = field(default_factory=PulseSpec)
    receiver: ReceiverSpec = field(default_factory=ReceiverSpec)
    output: OutputSpec = field(default_factory=OutputSpec)
    returns: ReturnsSpec = field(default_factory=ReturnsSpec)
    provenance: dict[str, str] | None = None
    """Where each value came from (field -> ``file: ...``, ``datasheet ...``, ``preset ...``); presets
    made from a vendor calibration file have it (:mod:`rt_lidar.sensor.vendor`)."""

    def __hash__(self) -> int:
        # The frame loop's table caches key on the preset: hash its deep field tuple once, not per frame.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(
                tuple(
                    tuple(sorted(v.items())) if isinstance(v, dict) else v
                    for v in (getattr(self, f.name) for f in dataclasses.fields(self))
                )
            )
            self.__dict__["_hash"] = cached
        return cached

    @property
    def n_rings(self) -> int:
        """Number of beams (rings, or scan lines for a raster pattern)."""
        return len(self.beams)

    def _column(self, name: str, dtype: type) -> np.ndarray:
        arr: np.ndarray = np.array([getattr(b, name) for b in self.beams], dtype=dtype)
        arr.flags.writeable = False
        return arr

    @functools.cached_property
    def elevations_deg(self) -> np.ndarray:
        """(n_rings,) float64 elevation per ring, index = ring."""
        return self._column("elevation_deg", np.float64)

    @functools.cached_property
    def azimuth_offsets_deg(self) -> np.ndarray:
        """(n_rings,) float64 azimuth offset per ring (math convention, adds to the head azimuth)."""
        return self._column("azimuth_offset_deg", np.float64)

    @functools.cached_property
    def firing_offsets_us(self) -> np.ndarray:
        """(n_rings,) float64 firing offset of each ring within the firing cycle."""
        return self._column("firing_offset_us", np.float64)

    @functools.cached_property
    def firing_state_offsets_us(self) -> np.ndarray | None:
        """(n_states, n_rings) float64 firing offset of each ring in each azimuth state (-1: it does not
        fire in that state), or None for a preset whose beams fire at ``firing_offset_us`` in every
        column."""
        rows = [b.firing_state_offsets_us for b in self.beams]
        if rows[0] is None:
            return None
        arr = np.array(rows, np.float64).T.copy()
        arr.flags.writeable = False
        return arr

    @functools.cached_property
    def beam_origins_m(self) -> np.ndarray | None:
        """(n_rings, 3) float64 origin of each beam in its head frame (radial, lateral, up: see
        :class:`Beam`), or None when every beam starts on the sensor axis and its points lie on it
        (zeros for beams on the axis whose decoder moves their points: two-point corrections)."""
        names = ("origin_radial_m", "origin_lateral_m", "origin_up_m")
        arr = np.array([[getattr(b, n) or 0.0 for n in names] for b in self.beams], np.float64)
        if not arr.any() and not any(b.dist_correction_x_m and b.dist_correction_y_m for b in self.beams):
            return None
        arr.flags.writeable = False
        return arr


def lambertian_return_w(
    peak_power_w: float,
    receiver_aperture_m: float,
    system_efficiency: float,
    range_m: float,
    reflectivity: float = 0.1,
    incidence_deg: float = 0.0,
    extinction_per_m: float = CLEAR_AIR_EXTINCTION_PER_M,
) -> float:
    """Power returned by a Lambertian target filling the beam (this project's laser radar equation).

    ``P_r = P_e * D_r**2 * eta * rho * cos(theta) * exp(-2 R a) / (4 R**2)``
    (:func:`kernels.intensity.sensor_constant`); with the defaults (10 % target, normal incidence, clear
    air) at the datasheet's 10 % range it gives the detection threshold.
    """
    return (
        sensor_constant(peak_power_w, receiver_aperture_m, system_efficiency)
        * reflectivity
        * math.cos(math.radians(incidence_deg))
        * math.exp(-2.0 * range_m * extinction_per_m)
        / range_m**2
    )


# --------------------------------------------------------------------------- validation


def _build(cls: type, table: Any, source: str, prefix: str) -> Any:
    """Build dataclass ``cls`` from a TOML table with the shared schema (keys, types, ranges)."""
    special = {"beams": lambda value, src, where: _build_beams(value, src)} if cls is SensorPreset else None
    return build(cls, table, source, prefix, PresetError, special)


def _build_beams(beams: Any, source: str) -> tuple[Beam, ...]:
    if not isinstance(beams, list) or not beams:
        raise PresetError(source, "beams", "must be a non-empty array of tables ([[beams]])")
    built = [_build(Beam, b, source, f"beams[{i}]") for i, b in enumerate(beams)]
    seen: dict[int, int] = {}
    for i, b in enumerate(built):
        if b.ring in seen:
            raise PresetError(
                source, f"beams[{i}].ring", f"duplicate ring {b.ring} (also beams[{seen[b.ring]}])"
            )
        seen[b.ring] = i
    n = len(built)
    for i, b in enumerate(built):
        if b.ring >= n:
            raise PresetError(
                source, f"beams[{i}].ring", f"rings must be 0..{n - 1} (one per beam), got {b.ring}"
            )
    return tuple(sorted(built, key=lambda b: b.ring))


def _check_scan(scan_table: dict[str, Any], p: SensorPreset, source: str) -> None:
    s = p.scan
    required, optional = _PATTERN_KEYS[s.pattern]
    for key in scan_table:
        if key != "pattern" and key not in required and key not in optional:
            raise PresetError(
                source,
                f"scan.{key}",
                f"not used by pattern '{s.pattern}'; allowed: {', '.join(required + optional)}",
            )
    for key in required:
        if key not in scan_table:
            raise PresetError(source, f"scan.{key}", f"is required for pattern '{s.pattern}'")
    if s.pattern == "rotating":
        lo, hi = s.rotation_hz_range
        if lo > hi:
            raise PresetError(source, "scan.rotation_hz_range", f"must be [low, high], got [{lo:g}, {hi:g}]")
        assert s.rotation_hz is not None
        if not lo <= s.rotation_hz <= hi:
            raise PresetError(
                source, "scan.rotation_hz", f"must be in [{lo:g}, {hi:g}] Hz, got {s.rotation_hz:g}"
            )
        if (s.columns_per_rev is None) == (s.firing_cycle_us is None):
            raise PresetError(
                source, "scan.columns_per_rev", "give exactly one of columns_per_rev, firing_cycle_us"
            )
    elev = p.elevations_deg
    if s.pattern == "raster" and s.lines_per_frame != p.n_rings:
        raise PresetError(
            source,
            "scan.lines_per_frame",
            f"must equal the number of beams (one per line), {p.n_rings}, got {s.lines_per_frame}",
        )
    if s.pattern in ("raster", "mirror"):
        assert s.fov_v_deg is not None and s.fov_h_deg is not None
        if float(elev.max() - elev.min()) > s.fov_v_deg + 1e-6:
            raise PresetError(
                source,
                "scan.fov_v_deg",
                f"must cover the beam elevations' span {elev.max() - elev.min():g} deg, got {s.fov_v_deg:g}",
            )
        az = p.azimuth_offsets_deg
        if float(az.max() - az.min()) >= s.fov_h_deg:
            raise PresetError(source, "scan.fov_h_deg", "must exceed the span of the beams' azimuth offsets")
    _check_adjust(p, source)
    _check_firing_states(p, source)
    if s.pattern == "rosette" and p.n_rings != 1:
        raise PresetError(source, "beams", f"a rosette preset has exactly one beam, got {p.n_rings}")


def _check_adjust(p: SensorPreset, source: str) -> None:
    """The AT128's adjust tables: every beam has both, of one length, and the scan names its fields."""
    tables = [(b.azimuth_adjust_deg, b.elevation_adjust_deg) for b in p.beams]
    given = [a is not None or e is not None for a, e in tables]
    if not any(given):
        return
    lengths = {len(t) for pair in tables for t in pair if t is not None}
    if not all(a is not None and e is not None for a, e in tables) or len(lengths) != 1:
        raise PresetError(
            source, "beams.azimuth_adjust_deg", "every beam needs both adjust tables, all of one length"
        )
    if lengths.pop() < 2 or p.scan.mirror_fields_deg is None:
        raise PresetError(
            source, "scan.mirror_fields_deg", "adjust tables need the mirror's fields (and >= 2 entries)"
        )


def _check_firing_states(p: SensorPreset, source: str) -> None:
    """Azimuth-state firing tables: every beam has one, all of one length, on a rotating head; every
    state fires some beam and every beam fires in some state."""
    rows = [b.firing_state_offsets_us for b in p.beams]
    if all(r is None for r in rows):
        return
    field = "beams.firing_state_offsets_us"
    if any(r is None for r in rows) or len({len(r or ()) for r in rows}) != 1:
        raise PresetError(source, field, "every beam needs one, all of one length (one per azimuth state)")
    if p.scan.pattern != "rotating":
        raise PresetError(source, field, f"applies to a rotating scan, not a {p.scan.pattern} one")
    table = np.array(rows, np.float64)
    if np.any((table < 0) & (table != -1.0)):
        raise PresetError(source, field, "an offset is >= 0 us, or -1 where the beam does not fire")
    if not np.all((table >= 0).any(axis=0)) or not np.all((table >= 0).any(axis=1)):
        raise PresetError(source, field, "every state must fire a beam and every beam fire in a state")


def _check_cross(p: SensorPreset, source: str) -> None:
    r = p.range
    if r.min_m >= r.max_m:
        raise PresetError(
            source, "range.min_m", f"must be below range.max_m = {r.max_m:g} m, got {r.min_m:g}"
        )
    if r.range_10pct_m is not None and not r.min_m < r.range_10pct_m <= r.max_m:
        raise PresetError(
            source, "range.range_10pct_m", f"must be in ({r.min_m:g}, {r.max_m:g}] m, got {r.range_10pct_m:g}"
        )
    if r.range_80pct_m is not None and (r.range_10pct_m is None or r.range_80pct_m <= r.range_10pct_m):
        raise PresetError(
            source, "range.range_80pct_m", f"needs range.range_10pct_m below it, got {r.range_80pct_m:g} m"
        )
    ret = p.returns
    if not ret.modes or len(set(ret.modes)) != len(ret.modes):
        raise PresetError(
            source, "returns.modes", f"must be non-empty without repeats, got {list(ret.modes)}"
        )
    if ret.default not in ret.modes:
        raise PresetError(
            source, "returns.default", f"must be one of returns.modes {list(ret.modes)}, got {ret.default!r}"
        )
    _check_profile(p.optics, source)
    out = p.output
    rx = p.receiver
    if rx.photon_floor_counts is not None:
        if rx.datasheet_ambient_lux <= 0:
            raise PresetError(
                source, "receiver.datasheet_ambient_lux", "must be > 0 lx with receiver.photon_floor_counts"
            )
        floor_counts = rx.threshold_snr * rx.photon_floor_counts
        if out.counts_at_threshold <= floor_counts:
            raise PresetError(
                source,
                "output.counts_at_threshold",
                f"must exceed threshold_snr x photon_floor_counts = {floor_counts:g} (the threshold with no "
                f"background light), got {out.counts_at_threshold:g}",
            )
    if out.diffuse_max is not None and out.intensity != "calibrated_reflectivity":
        raise PresetError(
            source,
            "output.diffuse_max",
            f'only with intensity = "calibrated_reflectivity", not "{out.intensity}"',
        )
    if out.diffuse_max is not None and out.diffuse_max > out.intensity_max:
        raise PresetError(
            source, "output.diffuse_max", f"must be in [1, {out.intensity_max}], got {out.diffuse_max}"
        )
    if (out.intensity == "raw_intensity") != (out.raw_gain is not None):
        raise PresetError(source, "output.raw_gain", 'given with intensity = "raw_intensity" and only then')
    if (out.raw_step is not None or out.raw_step_spread > 0) and out.intensity != "calibrated_reflectivity":
        stated = "output.raw_step" if out.raw_step is not None else "output.raw_step_spread"
        raise PresetError(source, stated, 'only with intensity = "calibrated_reflectivity"')
    if out.raw_step_spread > 0 and out.raw_step is None:
        raise PresetError(source, "output.raw_step_spread", "needs output.raw_step")
    top = out.diffuse_max or out.intensity_max
    if out.raw_step is not None and out.raw_step * (1.0 + out.raw_step_spread) > top / 2:
        raise PresetError(  # a coarser step reads every diffuse surface as 0 or the top
            source,
            "output.raw_step",
            f"each laser's step (raw_step x (1 + raw_step_spread)) must be at most half of {top}, "
            f"got {out.raw_step * (1.0 + out.raw_step_spread):g}",
        )
    if out.raw_knee is not None and (out.intensity != "raw_intensity" or out.raw_knee >= out.intensity_max):
        raise PresetError(
            source, "output.raw_knee", f'only with intensity = "raw_intensity", below {out.intensity_max}'
        )


def _check_profile(o: OpticsSpec, source: str) -> None:
    if (o.beam_exit_h_m is None) != (o.beam_exit_v_m is None):
        stated, missing = ("h", "v") if o.beam_exit_v_m is None else ("v", "h")
        raise PresetError(source, f"optics.beam_exit_{stated}_m", f"needs optics.beam_exit_{missing}_m too")
    given = [o.beam_profile_h_mrad, o.beam_profile_v_mrad, o.beam_profile_table]
    if o.beam_profile != "table":
        if any(g is not None for g in given):
            raise PresetError(source, "optics.beam_profile_table", "needs optics.beam_profile = 'table'")
        return
    h, v, tab = given
    if h is None or v is None or tab is None:
        raise PresetError(
            source,
            "optics.beam_profile_table",
            "a 'table' profile needs beam_profile_h_mrad, _v_mrad, _table",
        )
    for name, ax in (("beam_profile_h_mrad", h), ("beam_profile_v_mrad", v)):
        if len(ax) < 2 or any(b <= a for a, b in itertools.pairwise(ax)):
            raise PresetError(source, f"optics.{name}", "must hold >= 2 strictly ascending angles")
    if len(tab) != len(h) * len(v):
        raise PresetError(
            source, "optics.beam_profile_table", f"must hold {len(v)} x {len(h)} values, got {len(tab)}"
        )
    if max(tab) <= 0:
        raise PresetError(source, "optics.beam_profile_table", "must have a positive value")


MAX_SCAN_POINTS = 32_000_000
"""Most points one scan may hold (firings x ``returns.max_returns``): 1.2 GB of points, several
times that in the pipeline's buffers. The largest shipped preset (VLS-128) holds 0.72 M."""


def _check_size(p: SensorPreset, source: str) -> None:
    """Refuse a preset whose scans cannot fit in memory, naming the field that makes them so big."""
    from rt_lidar.sensor.scan_pattern import firings_per_scan  # it imports this module

    points = firings_per_scan(p) * p.returns.max_returns
    if points > MAX_SCAN_POINTS:
        s = p.scan
        field = {
            "rotating": "scan.columns_per_rev" if s.columns_per_rev is not None else "scan.firing_cycle_us",
            "mirror": "scan.columns_per_frame",
            "raster": "scan.points_per_line",
        }.get(s.pattern, "scan.point_rate_hz")
        gb = points * POINT_DTYPE.itemsize / 1e9
        raise PresetError(
            source,
            field,
            f"makes a scan of {points:,} points ({gb:.1f} GB, firings x returns.max_returns); "
            f"at most {MAX_SCAN_POINTS:,}",
        )


def preset_from_dict(d: dict[str, Any], source: str = "<dict>") -> SensorPreset:
    """Validate a preset given as a (TOML-shaped) dict; errors name ``source``, the field and the rule."""
    preset: SensorPreset = _build(SensorPreset, d, source, "")
    _check_scan(d["scan"], preset, source)
    _check_cross(preset, source)
    _check_size(preset, source)
    return preset


def preset_to_dict(preset: SensorPreset) -> dict[str, Any]:
    """The resolved preset as a JSON-able dict shaped like its TOML file.

    Unset optional values are left out, and so are the scan keys the pattern does not use (so
    ``scan.rotation_hz`` appears only for rotating sensors). ``preset_from_dict`` reads it back.
    """

    def plain(obj: Any) -> Any:
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return {
                f.name: plain(getattr(obj, f.name))
                for f in dataclasses.fields(obj)
                if getattr(obj, f.name) is not None
            }
        if isinstance(obj, (tuple, list)):
            return [plain(v) for v in obj]
        return obj

    d: dict[str, Any] = plain(preset)
    required, optional = _PATTERN_KEYS[preset.scan.pattern]
    d["scan"] = {k: v for k, v in d["scan"].items() if k == "pattern" or k in required or k in optional}
    return d


# --------------------------------------------------------------------------- loading


def _read_toml(path: Path | Any, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PresetError(source, "<file>", f"not valid TOML: {exc}") from exc


@functools.cache
def _package_index() -> dict[str, Any]:
    """Lower-case preset name -> package resource of its TOML file."""
    index: dict[str, Any] = {}
    for res in resources.files("rt_lidar.sensor_presets").iterdir():
        if res.name.endswith(".toml") and res.name not in NON_PRESET_FILES:
            name = _read_toml(res, f"sensor_presets/{res.name}").get("name")
            index[str(name if isinstance(name, str) else res.name[:-5]).lower()] = res
    return index


def list_presets() -> list[str]:
    """Names of the presets shipped in ``rt_lidar.sensor_presets``, sorted case-insensitively."""
    names = []
    for key, res in _package_index().items():
        name = _read_toml(res, f"sensor_presets/{res.name}").get("name", key)
        names.append(str(name))
    return sorted(names, key=str.lower)


@functools.cache
def _load_package(key: str) -> SensorPreset:
    res = _package_index()[key]
    source = f"sensor_presets/{res.name}"
    return preset_from_dict(_read_toml(res, source), source)


def load_preset(
    name_or_path: str | Path, model: str | None = None, lidar_mode: str | None = None
) -> SensorPreset:
    """Load a shipped preset by name (case-insensitive), any preset TOML file by path, or a vendor
    calibration file (Ouster metadata, Velodyne YAML / db.xml, Hesai CSV / .dat, RoboSense angle.csv;
    :mod:`rt_lidar.sensor.vendor`), with ``model`` and ``lidar_mode`` where the file does not say them.
    A vendor file may carry them in the reference itself: ``FILE#model=VLP-32A,lidar_mode=1024x10``."""
    from rt_lidar.sensor.vendor import is_vendor_ref, preset_from_vendor_file

    if is_vendor_ref(name_or_path):
        return preset_from_vendor_file(name_or_path, model=model, lidar_mode=lidar_mode)
    if isinstance(name_or_path, Path) or str(name_or_path).endswith(".toml"):
        path = Path(name_or_path)
        if not path.is_file():
            raise PresetError(str(path), "<file>", "no such preset file")
        return preset_from_dict(_read_toml(path, str(path)), str(path))
    key = name_or_path.lower()
    index = _package_index()
    if key not in index:
        stems = {res.name[:-5].lower(): k for k, res in index.items()}
        if key not in stems:
            raise PresetError(name_or_path, "name", f"unknown preset; available: {', '.join(list_presets())}")
        key = stems[key]
    return _load_package(key)
