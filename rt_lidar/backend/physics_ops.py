"""The operations of the single-ray physics, one implementation per backend, chosen once per pipeline.

The physics modules (:mod:`rt_lidar.physics.model`, :mod:`rt_lidar.physics.echo`) state the equations
and call these operations for their array work; a :class:`PhysicsBackend` provides them:

- :class:`NumpyBackend`: NumPy, the reference every other backend is held to;
- :class:`CompiledBackend`: the compiled twins (:mod:`rt_lidar.physics.fused`), bit for bit the NumPy
  values; where a twin does not take its inputs (other dtypes, a negative material) the NumPy
  operation runs instead, so every call gives the reference's values.

Each backend also names the device its weather and echo-waveform kernels run on
(:attr:`PhysicsBackend.kernels_device`, :mod:`rt_lidar.physics.device`): ``cpu`` (NumPy), ``cuda``
(CuPy on a GPU) or ``cuda-host`` (the CUDA C source compiled for the CPU, what a GPU run computes, in
float32). docs/determinism.md states what each promises: the same bytes within one backend, the same
statistics across them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rt_lidar.kernels import apply_range_noise, effective_reflectance, received_power, waveform_pulses
from rt_lidar.kernels.ambient import receiver_sigma_w
from rt_lidar.kernels.waveform import Returns, pulse_sigma_ns
from rt_lidar.physics import fused, intensity_fused, texture_fused
from rt_lidar.physics.device import HOST_CUDA, device_unavailable_reason, run_waveform_returns, run_weather
from rt_lidar.physics.intensity_chain import measure
from rt_lidar.points import POINT_DTYPE, PointFlag

if TYPE_CHECKING:
    from rt_lidar.physics.echo import EchoModel
    from rt_lidar.pipeline.sources import Hits
    from rt_lidar.rig.crosstalk import CrosstalkSensor
    from rt_lidar.sensor.materials import MaterialArrays
    from rt_lidar.sensor.presets import SensorPreset

__all__ = [
    "BACKEND_NAMES",
    "CompiledBackend",
    "NumpyBackend",
    "PhysicsBackend",
    "available_backends",
    "backend_named",
    "default_backend",
    "select_backend",
]

Rows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""``(range, power, measured reflectivity, segment, flags)`` of the detected pulses."""


class NumpyBackend:
    """The physics operations in NumPy (the reference), its kernels on :attr:`kernels_device`."""

    name = "numpy"

    def __init__(self, kernels_device: str = "cpu") -> None:
        self.kernels_device = kernels_device
        """Where the weather model and the echo waveform run (:mod:`rt_lidar.physics.device`)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kernels_device={self.kernels_device!r})"

    @property
    def label(self) -> str:
        """The backend's name with its kernels' device, as summaries and tests name it."""
        return self.name if self.kernels_device == "cpu" else f"{self.name}+{self.kernels_device}"

    def echo_power(
        self, model: EchoModel, range_m: Any, cos_inc: Any, mat: Any, extra_t: Any, path: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(received power W, effective reflectance S) of full-beam echoes (:meth:`EchoModel.power`;
        ``path``: :meth:`EchoModel.path_factor` at ``range_m`` where the caller has it)."""
        m = model.materials
        p = model.preset
        refl = effective_reflectance(
            cos_inc.astype(np.float32),
            mat,
            m.diffuse,
            m.retro_gain,
            m.retro_exponent,
            m.specular_gain,
            m.specular_exponent,
        )
        trans = (model.path_factor(range_m) if path is None else path) * extra_t
        power = received_power(
            range_m,
            refl,
            trans,
            p.pulse.peak_power_w,
            p.optics.receiver_aperture_m,
            p.optics.system_efficiency,
        )
        return power, refl

    def object_echo_power(
        self, model: EchoModel, hits: Hits, path: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(power W, effective reflectance, flags)`` of every ray's opaque surface, fresh arrays (misses
        and rays without an opaque surface: power 0; THROUGH_GLASS where glass was crossed on the way);
        ``path``: :meth:`EchoModel.path_factor` at ``hits.range_m`` where the caller has it."""
        obj = hits.material >= 0
        # Misses have range inf, so their power comes out 0 without masking every array first.
        with np.errstate(invalid="ignore", over="ignore"):
            power, refl = self.echo_power(
                model,
                hits.range_m,
                hits.cos_incidence,
                np.maximum(hits.material, 0),
                hits.glass_transmission,
                path,
            )
        power = np.where(obj, power, np.float32(0)).astype(np.float32, copy=False)
        refl = np.array(refl, np.float32, copy=True)
        flags = np.where(
            (hits.glass_material >= 0) & obj, np.uint8(PointFlag.THROUGH_GLASS), np.uint8(0)
        ).astype(np.uint8)
        return power, refl, flags

    def detect(
        self,
        model: EchoModel,
        power: np.ndarray,
        sigma: np.ndarray | None,
        rng: np.random.Generator,
        range_m: np.ndarray,
    ) -> np.ndarray:
        """The pulses the receiver detects (:meth:`EchoModel.detected`) within the preset's range limits,
        ascending."""
        lim = model.preset.range
        keep = model.detected(power, sigma, rng) & (range_m >= lim.min_m) & (range_m <= lim.max_m)
        return np.nonzero(keep)[0]

    def select_detections(
        self,
        model: EchoModel,
        idx: np.ndarray,
        range_m: np.ndarray,
        power: np.ndarray,
        segment: np.ndarray,
        flags: np.ndarray,
        path: np.ndarray | None = None,
    ) -> Rows:
        """``(range, power, measured reflectivity, segment, flags)`` of the detected pulses ``idx``
        (``path``: :meth:`EchoModel.path_factor` at ``range_m[idx]`` where the caller has it)."""
        r, pw = range_m[idx], power[idx]
        return r, pw, model.measured_reflectivity(pw, r, path), segment[idx], flags[idx]

    def range_noise(
        self,
        preset: SensorPreset,
        range_m: np.ndarray,
        standard_normal: np.ndarray,
        power_w: np.ndarray,
        sigma: np.ndarray,
        pulse: np.ndarray,
    ) -> np.ndarray:
        """The measured ranges (float32, clipped at 0): :func:`kernels.apply_range_noise` with the noise
        floor ``receiver_sigma_w(sigma[pulse], shot, power)`` and the preset's accuracy."""
        s_tot = receiver_sigma_w(sigma[pulse], preset.receiver.shot_w, power_w.astype(np.float64))
        psig = pulse_sigma_ns(preset.pulse.width_ns)
        measured = apply_range_noise(range_m, standard_normal, preset.range.accuracy_m, power_w, s_tot, psig)
        return np.maximum(measured, 0.0).astype(np.float32)

    def pack_points(
        self,
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
    ) -> np.ndarray:
        """The structured points (:data:`~rt_lidar.points.POINT_DTYPE`) of detections ``idx`` (pulses):
        x, y, z = ``direction[idx] * measured`` in float32, ``ring`` and ``t_ns`` taken at ``idx``."""
        out = np.empty(idx.shape[0], dtype=POINT_DTYPE)  # every field is written below (no padding)
        dsel = np.take(direction, idx, axis=0)
        m32 = np.asarray(measured, np.float32)
        for k, axis in enumerate("xyz"):
            np.multiply(dsel[:, k], m32, out=out[axis])
        out["intensity"] = intensity
        out["reflectivity"] = reflectivity
        out["ring"] = ring[idx]
        out["t"] = t_ns[idx]
        out["return_id"] = return_id
        out["flags"] = flags
        out["segment"] = segment
        return out

    def weather(
        self, model: Any, range_m: np.ndarray, power_w: np.ndarray, flags: np.ndarray, *rest: Any, **kw: Any
    ) -> None:
        """The weather ``model`` applied in place on :attr:`kernels_device` (:func:`run_weather`)."""
        run_weather(self.kernels_device, model, range_m, power_w, flags, *rest, **kw)

    def waveform_returns(self, t_ns: np.ndarray, amp: np.ndarray, *args: Any) -> Returns:
        """The echo waveform's reported returns on :attr:`kernels_device` (:func:`run_waveform_returns`)."""
        return run_waveform_returns(self.kernels_device, t_ns, amp, *args)

    def texture_apply(
        self,
        materials: MaterialArrays,
        hits: Hits,
        power: np.ndarray,
        refl: np.ndarray,
        beam: tuple[float, float, float] | None = None,
    ) -> None:
        """``power`` and ``refl`` scaled in place by the texture at each hit, averaged over each pulse's
        footprint of ``beam`` (:func:`rt_lidar.physics.texture.texture_apply`)."""
        from rt_lidar.physics.texture import texture_apply

        texture_apply(materials, hits, power, refl, beam)

    def measure_intensity(
        self,
        preset: SensorPreset,
        power_w: np.ndarray,
        pulse_sigma_w: np.ndarray | None,
        pulse: np.ndarray,
        standard_normal: np.ndarray,
        reflectivity: np.ndarray,
        range_m: np.ndarray,
        flags: np.ndarray,
        laser: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(reflectivity, intensity, flags) the sensor reports: the intensity chain
        (:func:`rt_lidar.physics.intensity_chain.measure`; ``laser``: each return's ring, for its
        laser's raw-reading table)."""
        return measure(
            preset, power_w, pulse_sigma_w, pulse, standard_normal, reflectivity, range_m, flags, laser
        )

    def crosstalk_echoes(
        self, a: CrosstalkSensor, pa: Any, b: CrosstalkSensor, pb: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(A pulse index, false range m, received power W) of every echo of sensor ``b``'s pulses
        ``pb`` in sensor ``a``'s windows (:func:`rt_lidar.rig.crosstalk.echoes`)."""
        from rt_lidar.rig.crosstalk import echoes

        return echoes(a, pa, b, pb)

    def world_directions(self, quat: np.ndarray, d_sensor: np.ndarray) -> np.ndarray:
        """(N, 3) float64 unit world directions of sensor-frame directions ``d_sensor`` (N, 3) rotated by
        wxyz quaternions ``quat`` (N, 4) float64 (:func:`rt_lidar.rig.crosstalk.world_directions`)."""
        from rt_lidar.rig.crosstalk import world_directions

        return world_directions(quat, d_sensor)


class CompiledBackend(NumpyBackend):
    """The compiled twins (:mod:`rt_lidar.physics.fused`): each operation in one compiled pass, bit for
    bit the NumPy values; the NumPy operation where the twin does not take the inputs or the twins are
    off (``RT_LIDAR_NO_TWINS=1``, :data:`rt_lidar.physics.fused.enabled`)."""

    name = "compiled"

    def echo_power(
        self, model: EchoModel, range_m: Any, cos_inc: Any, mat: Any, extra_t: Any, path: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        got = fused.echo_power(model, range_m, cos_inc, mat, extra_t, path=path)
        if got is not None:
            return got[0], got[1]
        return super().echo_power(model, range_m, cos_inc, mat, extra_t, path)

    def object_echo_power(
        self, model: EchoModel, hits: Hits, path: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        got = fused.echo_power(
            model,
            hits.range_m,
            hits.cos_incidence,
            hits.material,
            hits.glass_transmission,
            hits.glass_material,
            path=path,
        )
        if got is not None and got[2] is not None:
            return got[0], got[1], got[2]
        return super().object_echo_power(model, hits, path)

    def detect(
        self,
        model: EchoModel,
        power: np.ndarray,
        sigma: np.ndarray | None,
        rng: np.random.Generator,
        range_m: np.ndarray,
    ) -> np.ndarray:
        p = model.preset
        got = None
        if sigma is not None:  # the twin draws as EchoModel.detected does with noise floors
            got = fused.detect(
                power,
                sigma,
                rng,
                p.receiver.shot_w,
                p.pulse.detection_threshold_w,
                range_m,
                p.range.min_m,
                p.range.max_m,
            )
        return got if got is not None else super().detect(model, power, sigma, rng, range_m)

    def select_detections(
        self,
        model: EchoModel,
        idx: np.ndarray,
        range_m: np.ndarray,
        power: np.ndarray,
        segment: np.ndarray,
        flags: np.ndarray,
        path: np.ndarray | None = None,
    ) -> Rows:
        got = fused.detections(model, idx, range_m, power, segment, flags, path)
        if got is not None:
            return got
        return super().select_detections(model, idx, range_m, power, segment, flags, path)

    def range_noise(
        self,
        preset: SensorPreset,
        range_m: np.ndarray,
        standard_normal: np.ndarray,
        power_w: np.ndarray,
        sigma: np.ndarray,
        pulse: np.ndarray,
    ) -> np.ndarray:
        psig = pulse_sigma_ns(preset.pulse.width_ns)
        got = fused.range_noise(
            range_m,
            standard_normal,
            power_w,
            sigma,
            pulse,
            preset.receiver.shot_w,
            preset.range.accuracy_m,
            psig,
        )
        if got is not None:
            return got
        return super().range_noise(preset, range_m, standard_normal, power_w, sigma, pulse)

    def pack_points(
        self,
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
    ) -> np.ndarray:
        args = (direction, idx, measured, intensity, reflectivity, ring, t_ns, return_id, flags, segment)
        got = fused.pack_points(*args)
        return got if got is not None else super().pack_points(*args)

    def waveform_returns(self, t_ns: np.ndarray, amp: np.ndarray, *args: Any) -> Returns:
        got = waveform_pulses.waveform_returns(t_ns, amp, *args) if self.kernels_device == "cpu" else None
        return got if got is not None else super().waveform_returns(t_ns, amp, *args)

    def texture_apply(
        self,
        materials: MaterialArrays,
        hits: Hits,
        power: np.ndarray,
        refl: np.ndarray,
        beam: tuple[float, float, float] | None = None,
    ) -> None:
        from rt_lidar.physics.texture import material_seeds

        if not texture_fused.apply(materials, material_seeds(materials), hits, power, refl, beam):
            super().texture_apply(materials, hits, power, refl, beam)

    def measure_intensity(
        self,
        preset: SensorPreset,
        power_w: np.ndarray,
        pulse_sigma_w: np.ndarray | None,
        pulse: np.ndarray,
        standard_normal: np.ndarray,
        reflectivity: np.ndarray,
        range_m: np.ndarray,
        flags: np.ndarray,
        laser: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        args = (preset, power_w, pulse_sigma_w, pulse, standard_normal, reflectivity, range_m, flags, laser)
        got = intensity_fused.chain(*args)
        return got if got is not None else super().measure_intensity(*args)

    def crosstalk_echoes(
        self, a: CrosstalkSensor, pa: Any, b: CrosstalkSensor, pb: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from rt_lidar.rig import crosstalk_fused
        from rt_lidar.rig.crosstalk import twin_arguments

        got = crosstalk_fused.echoes(pa, pb, *twin_arguments(a, pa, b, pb))
        return got if got is not None else super().crosstalk_echoes(a, pa, b, pb)

    def world_directions(self, quat: np.ndarray, d_sensor: np.ndarray) -> np.ndarray:
        from rt_lidar.rig import crosstalk_fused

        got = crosstalk_fused.world_directions(quat, d_sensor)
        return got if got is not None else super().world_directions(quat, d_sensor)


PhysicsBackend = NumpyBackend
"""The interface of a physics backend (every backend is a :class:`NumpyBackend`: the reference's
operations, some of them replaced)."""

BACKEND_NAMES = ("numpy", "compiled", "cuda-host", "cuda")
"""The backends by name: ``numpy``; ``compiled`` (the twins; its kernels NumPy); ``cuda-host`` (the
twins, the weather and waveform kernels' CUDA C source compiled for the CPU); ``cuda`` (the twins,
those kernels in CuPy on a GPU)."""


def select_backend(kernels_device: str = "cpu", twins: bool | None = None) -> PhysicsBackend:
    """The backend of a pipeline: the compiled twins where they were built (``twins`` None) and are
    on, else NumPy; its weather and waveform kernels on ``kernels_device``."""
    use = fused.available() if twins is None else twins
    return CompiledBackend(kernels_device) if use else NumpyBackend(kernels_device)


def default_backend() -> PhysicsBackend:
    """The backend of a model built without one: :func:`select_backend` on the CPU."""
    return select_backend()


def backend_named(name: str) -> PhysicsBackend:
    """The backend ``name`` (:data:`BACKEND_NAMES`); ValueError for another name."""
    if name == "numpy":
        return NumpyBackend()
    if name == "compiled":
        return CompiledBackend()
    if name in ("cuda-host", "cuda"):
        return CompiledBackend(HOST_CUDA if name == "cuda-host" else "cuda")
    raise ValueError(f"unknown backend {name!r}; known: {', '.join(BACKEND_NAMES)}")


def available_backends() -> dict[str, str | None]:
    """Every backend name with why it cannot run here (None: it can): the twins need the built
    ``_fused`` extension, ``cuda-host`` a C++ compiler, ``cuda`` CuPy and a GPU."""
    twins = None if fused._c is not None else "the compiled twins (_fused) were not built"
    return {
        "numpy": None,
        "compiled": twins,
        "cuda-host": twins or device_unavailable_reason(HOST_CUDA),
        "cuda": twins or device_unavailable_reason("cuda"),
    }
