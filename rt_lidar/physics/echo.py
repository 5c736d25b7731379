"""The echo model: the laser radar equation for one sensor and one scene's materials.

P_r = P_e * eta * D_r^2 * S * T / (4 R^2) for a target filling the beam (:mod:`rt_lidar.kernels.intensity`),
with the effective reflectance S of the material at the incidence angle (diffuse, retro-reflective and
specular lobes) and the two-way transmission T of clear air (and of glass passed on the way). The
single-ray physics (:mod:`rt_lidar.physics.model`), the waveform returns (:mod:`rt_lidar.physics.returns`)
and the receiver noise and sunlight (:mod:`rt_lidar.physics.ambient`) all take their echo powers from
here, and what the sensor reports from them: the measured reflectivity (power over a white full-beam
target's) and detection against the pulses' noise floors (the preset's receiver model). The array work
of the radar equation runs on the model's :class:`~rt_lidar.backend.PhysicsBackend` (NumPy, or its
compiled twins: the same values).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rt_lidar.backend import PhysicsBackend, default_backend
from rt_lidar.kernels import received_power, two_way_transmission
from rt_lidar.kernels.ambient import receiver_sigma_w
from rt_lidar.physics import fused, path_factor_fused
from rt_lidar.physics.clear_coat import coat_apply
from rt_lidar.physics.grazing_lobe import grazing_apply
from rt_lidar.physics.laser_gain import ring_gains
from rt_lidar.physics.normals import standard_normal
from rt_lidar.physics.pulse_spread import peak_factor
from rt_lidar.physics.receiver_focus import beam_focus_ratio
from rt_lidar.physics.receiver_range import receiver_range_gain
from rt_lidar.physics.texture import footprint_beam
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.materials import MaterialArrays
from rt_lidar.sensor.presets import SensorPreset

__all__ = ["EchoModel", "KeptRows", "ObjectEchoes", "RayFactors", "ray_rings"]

ObjectEchoes = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""``(power W, effective reflectance, range m, segment, flags)`` of every ray."""


@dataclass(frozen=True)
class RayFactors:
    """What the object echoes of a batch computed at every ray's own surface range ``range_m``
    (``Hits.range_m``): the path factor (:meth:`EchoModel.path_factor`) and each laser's focus
    (:meth:`EchoModel.beam_focus`, None where no beam sets its own). Both are functions of the range
    (and the ray's laser) alone, so a detection at that same range needs the same values again
    (:meth:`at`) rather than computing them a second time."""

    range_m: np.ndarray
    path: np.ndarray
    focus: np.ndarray | None

    def at(self, rows: np.ndarray, range_m: np.ndarray) -> KeptRows:
        """The detections of rays ``rows`` at ranges ``range_m``: which of them keep their ray's range."""
        return KeptRows(self, rows, np.flatnonzero(np.take(self.range_m, rows) != range_m))


@dataclass(frozen=True)
class KeptRows:
    """Detections of rays ``rows`` against :class:`RayFactors` ``factors``: ``other`` the positions of
    those whose range is not their ray's surface range (a detection of glass, a ghost or the weather's
    clutter; a NaN range counts as another), every other detection keeps its ray's range."""

    factors: RayFactors
    rows: np.ndarray
    other: np.ndarray

    def take(self, values: np.ndarray, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """A function of each ray's range (and laser) at the detections: ``values[rows]`` (that function
        at the rays' ranges, one of ``factors``' arrays) where a detection keeps its ray's range (the
        same range: the same value), ``compute(other)`` for the others."""
        out = np.take(values, self.rows)
        if self.other.size:
            out[self.other] = compute(self.other)
        return out


@dataclass(frozen=True)
class EchoModel:
    """Received power of echoes for ``preset`` off the scene's ``materials`` in clear air."""

    preset: SensorPreset
    materials: MaterialArrays
    extinction_per_m: float = 1e-4
    """Clear-air extinction coefficient a (1/m) in exp(-2 a R)."""
    backend: PhysicsBackend = field(default_factory=default_backend, compare=False, repr=False)
    """Where the array work runs (:func:`rt_lidar.backend.select_backend`; the pipeline's)."""

    def path_factor(self, range_m: np.ndarray) -> np.ndarray:
        """Clear air's two-way transmission times the receiver's range law (1 where the preset follows
        1/R^2; :mod:`rt_lidar.physics.receiver_range`): what multiplies ``K S / R^2`` at ``range_m``
        (on the compiled backend in one compiled pass, :mod:`rt_lidar.physics.path_factor_fused`, the
        same bits)."""
        if self.backend.name == "compiled":
            fused = path_factor_fused.path_factor(self.preset, range_m, self.extinction_per_m)
            if fused is not None:
                return fused
        trans = two_way_transmission(range_m, self.extinction_per_m)
        gain = receiver_range_gain(self.preset, range_m)
        return trans if gain is None else trans * gain

    def beam_focus(self, ring: np.ndarray, range_m: np.ndarray) -> np.ndarray | None:
        """What each laser's own focus changes (float32, per echo of a pulse of ring ``ring`` at
        ``range_m``) against the preset-wide focus of :meth:`path_factor`: object and glass echoes are
        multiplied by it, calibrated reflectivity divided (the drivers compensate each laser's focus);
        None where no beam sets its own (:func:`~rt_lidar.physics.receiver_focus.beam_focus_ratio`).
        Each laser's own gain (:mod:`rt_lidar.physics.laser_gain`) multiplies it, in float32 after the
        focus ratio on every backend (the same bits)."""
        inv = path_factor_fused.inverse_focus(self.preset)  # (built once per preset)
        gain = ring_gains(self.preset)
        if inv is None:
            return None if gain is None else np.take(gain, np.asarray(ring, np.intp))
        ratio = None
        if self.backend.name == "compiled":
            ratio = path_factor_fused.beam_focus(self.preset, inv, ring, range_m)
        if ratio is None:
            ratio = np.asarray(beam_focus_ratio(np, self.preset, inv, ring, range_m), np.float32)
        return ratio if gain is None else ratio * np.take(gain, np.asarray(ring, np.intp))

    def unit_power(self, range_m: np.ndarray, path: np.ndarray | None = None) -> np.ndarray:
        """Received power (W) of a white Lambertian target (S = 1) filling the beam, in clear air
        (``path``: :meth:`path_factor` at ``range_m`` where the caller has it)."""
        p = self.preset
        trans = self.path_factor(range_m) if path is None else path
        return np.asarray(
            received_power(
                range_m,
                1.0,
                trans,
                p.pulse.peak_power_w,
                p.optics.receiver_aperture_m,
                p.optics.system_efficiency,
            ),
            np.float32,
        )

    def measured_reflectivity(
        self, power_w: np.ndarray, range_m: np.ndarray, path: np.ndarray | None = None
    ) -> np.ndarray:
        """What the sensor reports as reflectivity: the received power over that of a white Lambertian
        target filling the beam at the same range in clear air (so glass, fog and rain on the way, and a
        target only partly in the beam, lower it, as on a real sensor); ``path``: :meth:`path_factor`
        at ``range_m`` where the caller has it."""
        return (power_w / np.maximum(self.unit_power(range_m, path), 1e-30)).astype(np.float32)

    def detected(
        self, power_w: np.ndarray, sigma_w: np.ndarray | None, rng: np.random.Generator
    ) -> np.ndarray:
        """Which echoes of height ``power_w`` (one per pulse) the receiver detects: with the pulses' noise
        floors ``sigma_w`` (plus the echo's own shot noise, the preset's receiver), when the height plus a
        noise draw reaches the threshold (P_d = Q((T - P) / sigma)); without, when the height does."""
        threshold = self.preset.pulse.detection_threshold_w
        if sigma_w is None:
            return np.asarray(power_w >= threshold)
        z = standard_normal(rng, power_w.shape[0])
        s = receiver_sigma_w(sigma_w, self.preset.receiver.shot_w, power_w.astype(np.float64))
        return np.asarray(power_w + s * z >= threshold)

    def power(
        self, range_m: np.ndarray, cos_inc: np.ndarray, mat: np.ndarray, extra_t: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(received power W, effective reflectance S) of full-beam echoes off materials ``mat``, with
        the further two-way transmission ``extra_t`` (glass passed on the way): P = P_e eta D_r^2 S T /
        (4 R^2), S the diffuse, retro-reflective and specular lobes at the incidence angle (a painted
        surface's base through its clear coat: :mod:`rt_lidar.physics.clear_coat`), T = exp(-2 a R) *
        ``extra_t``."""
        power, refl = self.backend.echo_power(self, range_m, cos_inc, mat, extra_t)
        return self.coat(cos_inc, np.asarray(mat), power, refl)

    def coat(
        self, cos_inc: np.ndarray, mat: np.ndarray, power: np.ndarray, refl: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~rt_lidar.physics.clear_coat.coat_apply` (in one compiled pass on the compiled backend,
        :func:`rt_lidar.physics.fused.coat_apply`, the same bits)."""
        if self.backend.name == "compiled":
            fused_out = fused.coat_apply(self.materials, cos_inc, mat, power, refl)
            if fused_out is not None:
                return fused_out
        return coat_apply(self.materials, cos_inc, mat, power, refl)

    def object_echoes(self, hits: Hits) -> ObjectEchoes:
        """Every ray's echo of the opaque surface it hit: ``(power W, effective reflectance, range m,
        segment, flags)``, fresh arrays the caller may change (misses: power 0, range inf; a ray that
        crossed glass on the way is flagged THROUGH_GLASS); the surface's texture on top, averaged over
        each pulse's footprint (:func:`~rt_lidar.physics.texture.texture_apply`, on the backend); a pulse
        cast as one ray has its echo's peak lowered by its footprint's spread in range on an oblique surface
        (:func:`~rt_lidar.physics.pulse_spread.peak_factor`; a sub-ray bundle samples that itself)."""
        return self.object_echoes_kept(hits)[0]

    def object_echoes_kept(self, hits: Hits) -> tuple[ObjectEchoes, RayFactors]:
        """:meth:`object_echoes`, and the path factor and focus it computed at every ray's range
        (:class:`RayFactors`), for the detections that keep those ranges."""
        with np.errstate(invalid="ignore", over="ignore"):  # (misses: range inf)
            path = self.path_factor(hits.range_m)
        power, refl, flags = self.backend.object_echo_power(self, hits, path)
        if self.materials.coat_index is not None:  # the paints' clear coat (rt_lidar.physics.clear_coat)
            power, refl = self.coat(hits.cos_incidence, hits.material, power, refl)
        self.backend.texture_apply(self.materials, hits, power, refl, footprint_beam(self.preset))
        grazing_apply(self.materials, hits.material, hits.cos_incidence, power, refl)
        focus = self.beam_focus(ray_rings(hits), hits.range_m)  # each laser's own focus, where set
        if focus is not None:
            power *= focus
        if hits.subrays == 1 and not (  # (one compiled pass on the compiled backend: fused.peak_scale)
            self.backend.name == "compiled"
            and fused.peak_scale(self.preset, hits.range_m, hits.cos_incidence, power)
        ):
            power *= peak_factor(self.preset, hits.range_m, hits.cos_incidence)
        echoes = (power, refl, hits.range_m.copy(), hits.segment.copy(), flags)
        return echoes, RayFactors(hits.range_m, path, focus)


def ray_rings(hits: Hits) -> np.ndarray:
    """The ring of every ray of ``hits`` (a sub-ray bundle's rays are pulse-major)."""
    ring = hits.firings.ring
    return ring if hits.subrays == 1 else np.repeat(ring, hits.subrays)
