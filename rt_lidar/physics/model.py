"""The physics stage: received power, detection, range noise and output scale for every hit.

Turns :class:`~rt_lidar.pipeline.sources.Hits` into points of :data:`~rt_lidar.points.POINT_DTYPE` with the
kernels of :mod:`rt_lidar.kernels.intensity`. With one ray per pulse and the ``strongest`` mode, a ray that
crossed glass reports whichever echo is stronger, the glass's own mirror-like reflection or the
attenuated object behind it; below the detection threshold the ray drops. Sub-ray bundles and the
other return modes go through the waveform model (:mod:`rt_lidar.physics.returns`); the range walk of strong
returns (:meth:`SensorPhysics.range_walk`) acts on the returns of either path; sunlight
(:mod:`rt_lidar.physics.ambient`) acts on the detections of either. The array work runs on the
:class:`~rt_lidar.backend.PhysicsBackend` chosen once for the pipeline (NumPy, its compiled twins, the
kernels on a GPU: :mod:`rt_lidar.backend`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from rt_lidar.backend import PhysicsBackend, select_backend
from rt_lidar.kernels import leading_edge_walk_m
from rt_lidar.kernels.waveform import pulse_sigma_ns, single_echo_epw_ns
from rt_lidar.physics.ambient import noise_detections, pulse_background_w, pulse_noise_w
from rt_lidar.physics.ambient_threshold import preset_at_ambient
from rt_lidar.physics.device import KERNEL_DEVICES, device_unavailable_reason
from rt_lidar.physics.echo import EchoModel, KeptRows
from rt_lidar.physics.fused import prepare
from rt_lidar.physics.glass_ghost import glass_ghost_rows
from rt_lidar.physics.normals import standard_normal
from rt_lidar.physics.pulse_spread import echo_width_ns
from rt_lidar.physics.receiver_focus import prepare_focus
from rt_lidar.physics.returns import Detections, waveform_detections, window_of_panes
from rt_lidar.physics.source_fields import source_intensity_of_points
from rt_lidar.physics.spray import spray_apply
from rt_lidar.physics.weather import WeatherConfig, weather_model
from rt_lidar.physics.wet_road import wet_road_apply
from rt_lidar.pipeline.sources import Hits
from rt_lidar.points import PointFlag
from rt_lidar.schema import Where, check_fields, spec
from rt_lidar.sensor.beam import BeamConfig, SubRayPattern, subray_pattern
from rt_lidar.sensor.beam_origins import place_as_decoded
from rt_lidar.sensor.materials import MaterialArrays, MaterialTable, load_material_table
from rt_lidar.sensor.presets import SensorPreset

__all__ = ["PhysicsConfig", "PhysicsResult", "SensorPhysics"]


@dataclass(frozen=True)
class PhysicsConfig:
    """Scenario settings of the physics stage (the sensor's own numbers come from its preset)."""

    extinction_per_m: float = spec(1e-4, 0.0, None, "1/m")
    """Clear-air extinction coefficient a (1/m) in exp(-2 a R)."""
    range_noise: bool = True
    """Range noise: the datasheet accuracy and the 1 / sqrt(SNR) jitter of weak returns."""
    range_walk: bool = True
    """Range walk of the leading-edge discriminator: returns stronger than the receiver's saturation read
    closer (:func:`rt_lidar.kernels.intensity.leading_edge_walk_m`, docs/range-walk.md); False = none."""
    receiver_noise: bool = True
    """Detection as a probability from the SNR (and the noise's false alarms); False = an ideal receiver
    that detects every return at or above the threshold and nothing else."""
    weather: WeatherConfig | None = None
    """Rain, fog and snow (:mod:`rt_lidar.physics.weather`); None = clear air."""
    beam: BeamConfig | None = None
    """Sub-rays, return mode and echo pulse width (:mod:`rt_lidar.sensor.beam`); None = the preset's."""
    sun_illuminance_lux: float = spec(0.0, 0.0, 200_000.0, "lx")
    """Illuminance of the scene by the sun (0 = night, ~100 000 lx = full summer sun)."""
    sun_direction: tuple[float, float, float] | None = None
    """World-frame direction towards the sun (x fwd, y left, z up); None = the scene's."""
    kernels_device: str = spec("cpu", choices=KERNEL_DEVICES)
    """Where the weather model and the echo waveform run: ``cpu`` (NumPy) or ``cuda`` (CuPy on a GPU;
    :mod:`rt_lidar.physics.device`)."""

    def __post_init__(self) -> None:
        check_fields(self, "physics")

    def validate(self, what: Where) -> None:
        """The sun's direction must not be the zero vector."""
        d = self.sun_direction
        if d is not None and float(np.linalg.norm(np.asarray(d, np.float64))) < 1e-9:
            raise what.fail("sun_direction", f"must be a non-zero 3-vector, got {d!r}")
        why = device_unavailable_reason(self.kernels_device)
        if why:
            raise what.fail("kernels_device", f"'{self.kernels_device}' {why}")


@dataclass
class PhysicsResult:
    """Detected points of one batch plus what the batch fired and lost."""

    points: np.ndarray  # POINT_DTYPE, t = absolute firing time in ns (the sweep makes it scan-relative)
    power_w: np.ndarray  # received power of each kept point
    fired: int
    dropped: int
    """Pulses that reported no return at all."""
    epw_ns: np.ndarray | None = None
    """Echo pulse width (ns) of each point, when :attr:`BeamConfig.epw` asks for it."""
    ambient_w: np.ndarray | None = None
    """Sunlight (background) power (W, float32) on the detector during each point's pulse, from the
    footprint it looked at (:func:`~rt_lidar.physics.ambient.pulse_background_w`); set when the sun is
    on (at night there is none). What an Ouster reports as near-IR / ambient."""
    source_intensity: np.ndarray | None = None
    """(points,) float32 the hit source's own intensity of each point's ray (Cosys-AirSim's GPU lidar,
    :func:`~rt_lidar.physics.source_fields.source_intensity_of_points`), NaN for a point that is not
    its ray's surface; None when the source gives none."""

    def extras(self) -> dict[str, np.ndarray]:
        """Optional per-point fields beside ``points`` (``epw_ns``, ``ambient_w``, ``source_intensity``
        when computed or given)."""
        out = {} if self.epw_ns is None else {"epw_ns": self.epw_ns}
        if self.ambient_w is not None:
            out["ambient_w"] = self.ambient_w
        if self.source_intensity is not None:
            out["source_intensity"] = self.source_intensity
        return out


class SensorPhysics:
    """Received power and output of one sensor for the materials of one scene."""

    def __init__(
        self,
        preset: SensorPreset,
        materials: MaterialArrays,
        config: PhysicsConfig | None = None,
        backend: PhysicsBackend | None = None,
    ):
        self.config = config or PhysicsConfig()
        self.preset = preset_at_ambient(preset, self.config.sun_illuminance_lux)
        """The preset as this scene sees it: a photon-counting receiver's threshold follows the scene's
        ambient light (:mod:`rt_lidar.physics.ambient_threshold`); otherwise ``preset`` itself."""
        self.materials = materials
        self.backend = backend or select_backend(self.config.kernels_device)
        """Where the array work runs, chosen once (:func:`rt_lidar.backend.select_backend`)."""
        self.beam = self.config.beam or BeamConfig()
        self.sub_rays, self.return_mode = self.beam.resolve(preset)
        self.pattern: SubRayPattern = subray_pattern(preset, self.sub_rays)
        prepare()  # the compiled steps' one check now, not in the first frame
        prepare_focus(self.preset)  # the receiver focus's tables (~1 s for the HDL-64E) likewise
        self._prepare_weather()

    def _prepare_weather(self) -> None:
        """Build the weather kernel's tables for this sensor now (cached per weather and preset), so the
        first frame does not: ~0.18 s for 25 mm/h of rain on the HDL-64E, the particle table's detectable
        densities. The key is the one :meth:`apply` and the waveform's clutter ask for (the preset as this
        scene sees it, its threshold, the clear air, no window gain above 1)."""
        if self.config.weather is not None:
            weather_model(self.config.weather).params(
                self.preset, self.preset.pulse.detection_threshold_w, self.config.extinction_per_m
            )

    @classmethod
    def from_preset(
        cls,
        preset: SensorPreset,
        material_names: list[str],
        table: MaterialTable | None = None,
        config: PhysicsConfig | None = None,
        backend: PhysicsBackend | None = None,
    ) -> SensorPhysics:
        """Physics for ``preset`` with the scene's material names, evaluated at the preset's wavelength."""
        table = table or load_material_table()
        return cls(preset, table.arrays(material_names, preset.optics.wavelength_nm), config, backend)

    def set_weather(self, weather: dict[str, float] | None) -> None:
        """Switch the weather (a dict of :class:`~rt_lidar.physics.weather.WeatherConfig` fields, or None)."""
        cfg = WeatherConfig(**weather) if weather else None
        self.config = dataclasses.replace(self.config, weather=cfg)

    @property
    def needs_sun(self) -> bool:
        """True when sunlight is on, so the source should report the sun cosines."""
        return self.config.sun_illuminance_lux > 0

    def uses_waveform(self, hits: Hits) -> bool:
        """True when ``hits`` go through the waveform model (sub-rays, or a mode other than strongest)."""
        return hits.subrays > 1 or self.return_mode != "strongest"

    @property
    def echo(self) -> EchoModel:
        """The radar equation of this sensor and scene (clear air at the configured extinction)."""
        return EchoModel(self.preset, self.materials, self.config.extinction_per_m, self.backend)

    def unit_power(self, range_m: np.ndarray) -> np.ndarray:
        """Received power (W) of a white Lambertian target filling the beam (:meth:`EchoModel.unit_power`)."""
        return self.echo.unit_power(range_m)

    def measured_reflectivity(self, power_w: np.ndarray, range_m: np.ndarray) -> np.ndarray:
        """What the sensor reports as reflectivity (:meth:`EchoModel.measured_reflectivity`)."""
        return self.echo.measured_reflectivity(power_w, range_m)

    def power(
        self, range_m: np.ndarray, cos_inc: np.ndarray, mat: np.ndarray, extra_t: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(received power W, effective reflectance S) of full-beam echoes (:meth:`EchoModel.power`)."""
        return self.echo.power(range_m, cos_inc, mat, extra_t)

    def apply(self, hits: Hits, rng: np.random.Generator) -> PhysicsResult:
        """Detected points of ``hits``; ``rng`` gives the range-noise draws (seeded upstream)."""
        p = self.preset
        threshold = p.pulse.detection_threshold_w
        echo = self.echo
        lux = self.config.sun_illuminance_lux
        noisy = self.config.receiver_noise
        background = pulse_background_w(echo, lux, hits) if lux > 0 else None
        sigma = pulse_noise_w(echo, lux, hits, background) if noisy or self.config.range_noise else None
        det_sigma = sigma if noisy else None
        kept: KeptRows | None = None  # (the single-ray path's detections against its object echoes)
        if hits.bundle is not None:  # --beam full: the bundle only where the footprint needs it
            from rt_lidar.physics.beam_full import full_beam_detections

            det = full_beam_detections(self, echo, hits, rng, det_sigma)
        elif self.uses_waveform(hits):
            det = waveform_detections(
                echo,
                hits,
                rng,
                mode=self.return_mode,
                weather=self.config.weather,
                epw=self.beam.epw,
                sigma=det_sigma,
            )
        else:
            det, kept = self._single_kept(echo, hits, rng, det_sigma)
        focus = detection_focus(echo, hits, det, kept)
        if focus is not None:  # calibrated reflectivity divides each laser's own focus out
            det.reflectivity = (det.reflectivity / focus).astype(np.float32)
        pw = det.power_w
        if self.config.range_walk and len(det):
            det.range_m = self.range_walk(det.range_m, pw)
        measured = det.range_m
        if self.config.range_noise and sigma is not None:
            noise = standard_normal(rng, len(det), np.float32)
            measured = self.backend.range_noise(p, measured, noise, pw, sigma, det.pulse)
        if noisy and sigma is not None:
            det.range_m = np.asarray(measured, np.float32)
            det = noise_detections(echo, lux, hits, det, sigma, rng)
            measured, pw = det.range_m, det.power_w
        idx = det.pulse

        direction = hits.direction if hits.subrays == 1 else hits.firings.directions()
        # intensity is measured: the amplitude carries a draw of the detection's noise (intensity_chain)
        amp_sigma = sigma if (noisy and sigma is not None) else None
        amp_z = standard_normal(rng, len(det)) if amp_sigma is not None else np.zeros(len(det))
        f = hits.firings
        laser = np.take(f.ring, idx) if p.output.raw_step is not None else None  # each laser's table
        refl, intensity, det.flags = self.backend.measure_intensity(
            p, pw, amp_sigma, idx, amp_z, det.reflectivity, measured, det.flags, laser
        )
        out = self.backend.pack_points(
            direction, idx, measured, intensity, refl, f.ring, f.t_ns, det.return_id, det.flags, det.segment
        )
        if f.origin is not None:  # beams that start off the axis: the point is where the decoder puts it
            place_as_decoded(
                p, out, np.take(f.origin, idx, axis=0), np.take(direction, idx, axis=0), measured
            )
        epw = det.epw_ns
        if self.beam.epw and epw is None:
            epw = single_echo_epw_ns(pw, threshold, p.pulse.width_ns, p.pulse.epw_offset_ns).astype(
                np.float32
            )
        with_return = int(np.count_nonzero(det.return_id == 0))
        ambient = None if background is None else background[idx].astype(np.float32)
        return PhysicsResult(
            points=out,
            power_w=pw,
            fired=hits.pulses,
            dropped=hits.pulses - with_return,
            epw_ns=epw,
            ambient_w=ambient,
            source_intensity=source_intensity_of_points(hits, idx, det.segment, det.flags),
        )

    def range_walk(self, range_m: np.ndarray, power_w: np.ndarray) -> np.ndarray:
        """Ranges ``range_m`` as the leading-edge discriminator reports echoes of height ``power_w``:
        unchanged up to the receiver's saturation, closer beyond (:func:`kernels.leading_edge_walk_m`)."""
        p = self.preset
        thr = p.pulse.detection_threshold_w
        sat = p.receiver.saturation(thr)
        out = np.array(range_m, dtype=np.float32, copy=True)
        strong = np.nonzero(power_w > sat)[0]  # few points walk: only they are computed
        if strong.size:
            walk = leading_edge_walk_m(
                power_w[strong].astype(np.float64), thr, pulse_sigma_ns(p.pulse.width_ns), sat
            )
            out[strong] = np.maximum(out[strong] + walk, 0.0)
        return out

    def detected(
        self, power_w: np.ndarray, sigma_w: np.ndarray | None, rng: np.random.Generator
    ) -> np.ndarray:
        """Which echoes of height ``power_w`` the receiver detects (:meth:`EchoModel.detected`)."""
        return self.echo.detected(power_w, sigma_w, rng)

    def _single(
        self, echo: EchoModel, hits: Hits, rng: np.random.Generator, sigma: np.ndarray | None = None
    ) -> Detections:
        """One ray per firing, strongest echo: the stronger of glass and object, then detection (with
        the pulses' noise floors ``sigma``: a probability, :meth:`EchoModel.detected`)."""
        return self._single_kept(echo, hits, rng, sigma)[0]

    def _single_kept(
        self, echo: EchoModel, hits: Hits, rng: np.random.Generator, sigma: np.ndarray | None = None
    ) -> tuple[Detections, KeptRows]:
        """:meth:`_single`, and its detections against the path factor and focus its object echoes
        computed at every ray's range (:class:`~rt_lidar.physics.echo.KeptRows`): the detections at
        those ranges take them rather than computing them again."""
        p = self.preset
        threshold = p.pulse.detection_threshold_w
        glass = hits.glass_material >= 0
        (power, refl, rng_m, segment, flags), factors = echo.object_echoes_kept(hits)
        wetness = self.config.weather.road_wetness if self.config.weather is not None else 0.0
        ghost = wet_road_apply(echo, hits, wetness, power) if wetness > 0 else None
        spray = spray_apply(echo, hits, wetness, power, rng) if wetness > 0 else None
        gi = np.flatnonzero(glass)
        if gi.size:
            gp, grefl = echo.power(
                np.take(hits.glass_range_m, gi),
                np.take(hits.glass_cos, gi),
                np.take(hits.glass_material, gi),
                window_of_panes(hits, gi),
            )
            focus = echo.beam_focus(np.take(hits.firings.ring, gi), np.take(hits.glass_range_m, gi))
            if focus is not None:
                gp = gp * focus
            stronger = gp > power[gi]
            take = gi[stronger]
            power[take], refl[take] = gp[stronger], grefl[stronger]
            rng_m[take] = hits.glass_range_m[take]
            segment[take] = hits.glass_segment[take]
            flags[take] = 0
        glass_ghost = glass_ghost_rows(echo, hits)  # (every other ray's ghost is power 0: it wins none)
        if glass_ghost is not None:  # the mirror ghosts, where stronger than what the ray saw
            gi, g_r, g_p, g_s, g_seg = glass_ghost
            w = np.flatnonzero(g_p > np.take(power, gi))  # (few win: their indices, not passes over a mask)
            won = gi[w]
            power[won], refl[won], rng_m[won] = g_p[w], g_s[w], g_r[w]
            segment[won], flags[won] = g_seg[w], 0
        if ghost is not None:  # the wet road's mirror ghost, where stronger
            g_r, g_p, g_s, g_seg = ghost
            won = np.flatnonzero(g_p > power)
            power[won], refl[won], rng_m[won] = g_p[won], g_s[won], g_r[won]
            segment[won], flags[won] = g_seg[won], 0
        if spray is not None:  # the spray's droplet echo, where stronger
            s_r, s_p = spray
            won = np.flatnonzero(s_p > power)
            power[won], refl[won], rng_m[won] = s_p[won], 0.0, s_r[won]
            segment[won], flags[won] = 0, int(PointFlag.RAIN_CLUTTER)

        if self.config.weather is not None:
            self.backend.weather(
                weather_model(self.config.weather),
                rng_m,
                power,
                flags,
                hits.direction,
                p,
                threshold,
                rng,
                clear_air_per_m=self.config.extinction_per_m,
                reflectivity=refl,
                segment=segment,
                window=hits.window_transmission,  # the clutter's echoes leave through the window too
            )
        # detected: the echo plus a draw of the noise reaches the threshold, within the range limits
        idx = self.backend.detect(echo, power, sigma, rng, rng_m)
        r_idx = np.take(rng_m, idx)
        kept = factors.at(idx, r_idx)
        path = kept.take(factors.path, lambda k: echo.path_factor(r_idx[k]))
        r_sel, p_sel, refl_sel, seg_sel, fl_sel = self.backend.select_detections(
            echo, idx, rng_m, power, segment, flags, path
        )
        det = Detections(idx, np.zeros(idx.size, np.uint8), r_sel, p_sel, refl_sel, seg_sel, fl_sel)
        if self.beam.epw:  # an object's echo is as wide as its footprint's spread in range makes it
            obj_r = np.take(hits.range_m, idx)
            width = np.where(
                r_sel == obj_r,
                echo_width_ns(p, obj_r, np.take(hits.cos_incidence, idx)),
                p.pulse.width_ns,
            )
            unit = single_echo_epw_ns(p_sel, threshold, 1.0)  # the width of a 1 ns echo, scaled
            epw = np.where(p_sel >= threshold, p.pulse.epw_offset_ns + width * unit, 0.0)
            det.epw_ns = epw.astype(np.float32)
        return det, kept


def detection_focus(echo: EchoModel, hits: Hits, det: Detections, kept: KeptRows | None) -> np.ndarray | None:
    """Each laser's own focus (:meth:`EchoModel.beam_focus`) at the detections ``det`` of ``hits`` (None
    where no beam sets its own, or no detections): with the single-ray path's ``kept`` (those same
    detections against its object echoes), the object echoes' focus where a detection keeps its ray's
    range."""
    if not len(det):
        return None
    ring = np.take(hits.firings.ring, det.pulse)
    if kept is None or kept.factors.focus is None:
        return echo.beam_focus(ring, det.range_m)
    r = det.range_m

    def compute(k: np.ndarray) -> np.ndarray:
        got = echo.beam_focus(ring[k], r[k])
        assert got is not None  # (kept.factors.focus is not None: the preset's beams set their focus)
        return got

    return kept.take(kept.factors.focus, compute)
