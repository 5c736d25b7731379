"""Fitting a preset's beam, power and echo-pulse-width parameters from laboratory tables.

The physically based seed's method: the beam pattern (transmitter x receiver sensitivity) is measured
on a target swept by a goniometer, received intensity on Lambertian targets of known reflectivity at
known ranges, and the echo pulse width against received power. Three tables, three fits:

- :func:`fit_beam_profile`: ``bg + A exp(-2 (dh/w_h)^2 - 2 (dv/w_v)^2)`` by least squares on the
  angular grid; the divergences are the 1/e^2 full angles ``2 w``;
- :func:`fit_power`: the laser radar equation ``P = K rho exp(-2 a R) / R^2`` is linear in log space,
  ``ln(P R^2 / rho) = ln K - 2 a R``; ``K = P_e D_r^2 eta / 4`` gives the peak power for the preset's
  aperture and efficiency (the lab's extinction ``a`` comes out beside it);
- :func:`fit_epw`: ``EPW = offset + 2 sigma sqrt(2 ln(P / T))`` is linear in ``sqrt(2 ln(P/T))``; the
  slope gives the pulse width (FWHM ``2 sqrt(2 ln 2) sigma``), the intercept the electronics offset.

:func:`calibrate` applies the fits to a preset; :func:`preset_toml` writes it as a preset file. The
``synthetic_*`` functions make tables from known parameters (tests, the tool's ``--demo``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from rt_lidar.kernels.intensity import sensor_constant
from rt_lidar.kernels.waveform import single_echo_epw_ns
from rt_lidar.sensor.presets import SensorPreset, preset_from_dict, preset_to_dict
from rt_lidar.sensor.vendor.toml_out import preset_toml_text

__all__ = [
    "BeamFit",
    "EpwFit",
    "PowerFit",
    "calibrate",
    "fit_beam_profile",
    "fit_epw",
    "fit_power",
    "preset_toml",
    "synthetic_epw_table",
    "synthetic_intensity_table",
    "synthetic_profile_table",
]


@dataclass(frozen=True)
class BeamFit:
    """Fitted Gaussian footprint: 1/e^2 full divergences, centre offsets (mrad), peak, background."""

    divergence_h_mrad: float
    divergence_v_mrad: float
    center_h_mrad: float
    center_v_mrad: float
    peak: float
    background: float


@dataclass(frozen=True)
class PowerFit:
    """Fitted radar-equation constant K, the peak power it implies and the lab's extinction (1/m)."""

    k_w_m2: float
    peak_power_w: float
    extinction_per_m: float


@dataclass(frozen=True)
class EpwFit:
    """Fitted pulse width (FWHM, ns) and EPW offset (ns)."""

    width_ns: float
    offset_ns: float


def fit_beam_profile(h_mrad: np.ndarray, v_mrad: np.ndarray, values: np.ndarray) -> BeamFit:
    """Gaussian fit of a profile sampled on the grid ``values[v, h]`` (any scale, background allowed)."""
    h, v = np.meshgrid(np.asarray(h_mrad, float), np.asarray(v_mrad, float))
    z = np.asarray(values, float)
    if z.shape != h.shape:
        raise ValueError(f"profile table is {z.shape}, grid is {h.shape} (rows = v, columns = h)")
    if float(np.ptp(z)) <= 0:
        raise ValueError("profile table is flat")
    # start from the peak and the half-maximum widths through it (robust to noise and background)
    bg0 = float(np.median(z))
    j, i = np.unravel_index(int(np.argmax(z)), z.shape)
    half = bg0 + 0.5 * (float(z[j, i]) - bg0)
    gh, gv = np.asarray(h_mrad, float), np.asarray(v_mrad, float)
    fwhm_h = max(int((z[j, :] >= half).sum()), 1) * float(np.median(np.diff(gh))) if gh.size > 1 else 1.0
    fwhm_v = max(int((z[:, i] >= half).sum()), 1) * float(np.median(np.diff(gv))) if gv.size > 1 else 1.0
    ch, cv = float(gh[i]), float(gv[j])
    to_w = 1.0 / math.sqrt(2.0 * math.log(2.0))  # FWHM -> 1/e^2 half width of exp(-2 (x / w)^2)
    sh, sv = fwhm_h * to_w / 2.0, fwhm_v * to_w / 2.0

    def model(x: np.ndarray) -> np.ndarray:
        a, bg, h0, v0, wh, wv = x
        return bg + a * np.exp(-2.0 * ((h - h0) / wh) ** 2 - 2.0 * ((v - v0) / wv) ** 2)

    x0 = np.array([float(z[j, i]) - bg0, bg0, ch, cv, 2 * sh, 2 * sv])
    fit = least_squares(lambda x: (model(x) - z).ravel(), x0, method="lm")
    a, bg, h0, v0, wh, wv = fit.x
    return BeamFit(2 * abs(float(wh)), 2 * abs(float(wv)), float(h0), float(v0), float(a), float(bg))


def fit_power(
    range_m: np.ndarray, reflectivity: np.ndarray, power_w: np.ndarray, aperture_m: float, efficiency: float
) -> PowerFit:
    """Radar-equation fit of received power on Lambertian targets (normal incidence, filling the beam)."""
    r, rho, p = (np.asarray(a, float).ravel() for a in (range_m, reflectivity, power_w))
    ok = (p > 0) & (rho > 0) & (r > 0)
    if ok.sum() < 2:
        raise ValueError("intensity table needs at least two positive rows")
    y = np.log(p[ok] * r[ok] ** 2 / rho[ok])
    a_mat = np.stack([np.ones(int(ok.sum())), r[ok]], axis=1)
    (ln_k, slope), *_ = np.linalg.lstsq(a_mat, y, rcond=None)
    k = math.exp(float(ln_k))
    return PowerFit(k, k / sensor_constant(1.0, aperture_m, efficiency), max(-float(slope) / 2.0, 0.0))


def fit_epw(power_w: np.ndarray, epw_ns: np.ndarray, threshold_w: float) -> EpwFit:
    """Pulse width and offset from echo pulse widths measured against received power."""
    p, e = np.asarray(power_w, float).ravel(), np.asarray(epw_ns, float).ravel()
    ok = p > threshold_w * 1.0001
    if ok.sum() < 2:
        raise ValueError("EPW table needs at least two rows above the detection threshold")
    x = np.sqrt(2.0 * np.log(p[ok] / threshold_w))
    (off, slope), *_ = np.linalg.lstsq(np.stack([np.ones(x.size), x], axis=1), e[ok], rcond=None)
    sigma = float(slope) / 2.0
    return EpwFit(sigma * 2.0 * math.sqrt(2.0 * math.log(2.0)), float(off))


def calibrate(
    preset: SensorPreset,
    beam: BeamFit | None = None,
    power: PowerFit | None = None,
    epw: EpwFit | None = None,
    profile_table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> SensorPreset:
    """``preset`` with the fitted parameters; ``profile_table`` (h, v, values) stores the measured
    profile itself (``beam_profile = "table"``) beside the fitted divergences."""
    o, pu = preset.optics, preset.pulse
    if beam is not None:
        o = dataclasses.replace(
            o,
            beam_divergence_h_mrad=round(beam.divergence_h_mrad, 6),
            beam_divergence_v_mrad=round(beam.divergence_v_mrad, 6),
        )
    if profile_table is not None:
        h, v, tab = profile_table
        o = dataclasses.replace(
            o,
            beam_profile="table",
            beam_profile_h_mrad=tuple(float(x) for x in h),
            beam_profile_v_mrad=tuple(float(x) for x in v),
            beam_profile_table=tuple(float(x) for x in np.maximum(np.asarray(tab, float), 0.0).ravel()),
        )
    if power is not None:
        pu = dataclasses.replace(pu, peak_power_w=float(f"{power.peak_power_w:.6g}"))
    if epw is not None:
        pu = dataclasses.replace(pu, width_ns=round(epw.width_ns, 6), epw_offset_ns=round(epw.offset_ns, 6))
    out = dataclasses.replace(
        preset, optics=o, pulse=pu, source=f"{preset.source}; calibrated from lab tables"
    )
    return preset_from_dict(preset_to_dict(out), "<calibrated>")  # validated like any preset file


def preset_toml(preset: SensorPreset) -> str:
    """The preset as a TOML preset file (scalars, then tables with ``[provenance]``'s dotted keys
    quoted, then ``[[beams]]``)."""
    return preset_toml_text(preset, "Written by tools/calibrate_preset.py")


def synthetic_profile_table(
    div_h_mrad: float,
    div_v_mrad: float,
    half_extent_mrad: float = 6.0,
    step_mrad: float = 0.25,
    noise: float = 0.0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(h, v, values) of a Gaussian profile on a grid, with relative Gaussian noise ``noise``."""
    ax = np.arange(-half_extent_mrad, half_extent_mrad + 1e-9, step_mrad)
    hh, vv = np.meshgrid(ax, ax)
    z = np.exp(-2 * (hh / (div_h_mrad / 2)) ** 2 - 2 * (vv / (div_v_mrad / 2)) ** 2)
    z = z + noise * np.random.default_rng(seed).standard_normal(z.shape)
    return ax, ax.copy(), z


def synthetic_intensity_table(
    preset: SensorPreset, extinction_per_m: float = 1e-4, noise: float = 0.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(range, reflectivity, power) of Lambertian targets 5..100 m, 5..90 %, multiplicative noise."""
    r, rho = np.meshgrid(np.linspace(5.0, 100.0, 20), np.array([0.05, 0.1, 0.3, 0.5, 0.9]))
    o = preset.optics
    k = sensor_constant(preset.pulse.peak_power_w, o.receiver_aperture_m, o.system_efficiency)
    p = k * rho * np.exp(-2 * extinction_per_m * r) / r**2
    p = p * np.exp(noise * np.random.default_rng(seed).standard_normal(p.shape))
    return r.ravel(), rho.ravel(), p.ravel()


def synthetic_epw_table(
    preset: SensorPreset, noise_ns: float = 0.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(power, EPW) of single echoes from 1.5x to 1e5x the threshold, with Gaussian noise in ns."""
    thr = preset.pulse.detection_threshold_w
    p = thr * np.logspace(math.log10(1.5), 5, 40)
    e = single_echo_epw_ns(p, thr, preset.pulse.width_ns, preset.pulse.epw_offset_ns)
    e = e + noise_ns * np.random.default_rng(seed).standard_normal(p.shape)
    return p, e
