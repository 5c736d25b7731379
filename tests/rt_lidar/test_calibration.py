"""Calibration from lab tables: known parameters come back from clean tables and sensibly from noisy ones."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.sensor.calibration import (
    calibrate,
    fit_beam_profile,
    fit_epw,
    fit_power,
    preset_toml,
    synthetic_epw_table,
    synthetic_intensity_table,
    synthetic_profile_table,
)
from rt_lidar.sensor.presets import load_preset

ROOT = Path(__file__).resolve().parents[2]
TRUE = load_preset("VLP-16")
KNOWN = dataclasses.replace(
    TRUE,
    optics=dataclasses.replace(TRUE.optics, beam_divergence_h_mrad=2.4, beam_divergence_v_mrad=1.1),
    pulse=dataclasses.replace(TRUE.pulse, peak_power_w=44.0, width_ns=4.5, epw_offset_ns=1.2),
)


def _fit_all(noise: float, seed: int = 0):
    o = KNOWN.optics
    beam = fit_beam_profile(*synthetic_profile_table(2.4, 1.1, noise=0.02 * noise, seed=seed))
    power = fit_power(
        *synthetic_intensity_table(KNOWN, noise=0.05 * noise, seed=seed),
        o.receiver_aperture_m,
        o.system_efficiency,
    )
    epw = fit_epw(
        *synthetic_epw_table(KNOWN, noise_ns=0.2 * noise, seed=seed), KNOWN.pulse.detection_threshold_w
    )
    return beam, power, epw


@pytest.mark.parametrize(("noise", "tol"), [(0.0, 0.02), (1.0, 0.05)])
def test_known_parameters_come_back(noise, tol):
    beam, power, epw = _fit_all(noise)
    assert beam.divergence_h_mrad == pytest.approx(2.4, rel=tol)
    assert beam.divergence_v_mrad == pytest.approx(1.1, rel=tol)
    assert power.peak_power_w == pytest.approx(44.0, rel=tol)
    assert power.extinction_per_m == pytest.approx(1e-4, abs=2e-4 if noise else 1e-7)
    assert epw.width_ns == pytest.approx(4.5, rel=tol)
    assert epw.offset_ns == pytest.approx(1.2, abs=0.3 if noise else 0.02)


def test_calibrated_preset_file_loads_back(tmp_path):
    beam, power, epw = _fit_all(0.0)
    prof = synthetic_profile_table(2.4, 1.1)
    out = calibrate(TRUE, beam, power, epw, profile_table=prof)
    path = tmp_path / "cal.toml"
    path.write_text(preset_toml(out))
    back = load_preset(path)
    assert back == out
    assert back.optics.beam_profile == "table" and back.pulse.peak_power_w == pytest.approx(44.0, rel=1e-4)
    assert back.optics.beam_divergence_h_mrad == pytest.approx(2.4, rel=1e-3)


def test_tool_runs_on_csv_tables(tmp_path):
    h, v, z = synthetic_profile_table(3.0, 1.5)
    hh, vv = np.meshgrid(h, v)
    np.savetxt(
        tmp_path / "p.csv",
        np.c_[hh.ravel(), vv.ravel(), z.ravel()],
        delimiter=",",
        header="h_mrad,v_mrad,value",
        comments="",
    )
    p, e = synthetic_epw_table(KNOWN)
    np.savetxt(tmp_path / "e.csv", np.c_[p, e], delimiter=",", header="power_w,epw_ns", comments="")
    out = tmp_path / "out.toml"
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "calibrate_preset.py"),
            "--preset",
            "VLP-16",
            "--profile",
            str(tmp_path / "p.csv"),
            "--epw",
            str(tmp_path / "e.csv"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    cal = load_preset(out)
    assert cal.optics.beam_divergence_h_mrad == pytest.approx(3.0, rel=0.01)
    assert cal.pulse.width_ns == pytest.approx(4.5, rel=0.01)
