"""Fit a preset's beam profile, peak power and echo-pulse-width parameters from laboratory tables.

Tables are CSV files with a header row:

- ``--profile``: ``h_mrad,v_mrad,value`` (the beam pattern on an angular grid, any scale);
- ``--intensity``: ``range_m,reflectivity,power_w`` (Lambertian targets at normal incidence);
- ``--epw``: ``power_w,epw_ns`` (echo pulse width against received power).

    python tools/calibrate_preset.py --preset VLP-16 --profile p.csv --intensity i.csv --epw e.csv \\
        --out my-vlp16.toml [--store-table]
    python tools/calibrate_preset.py --preset VLP-16 --demo --out /tmp/demo.toml   # synthetic tables

Prints the fitted parameters as JSON and writes the calibrated preset file (validated on write).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

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

__all__ = ["main", "read_csv"]


def read_csv(path: str | Path, columns: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """The named float columns of a CSV file with a header row."""
    data = np.genfromtxt(path, delimiter=",", names=True, dtype=float)
    missing = [c for c in columns if c not in (data.dtype.names or ())]
    if missing:
        raise SystemExit(f"{path}: missing columns {missing}; expected {', '.join(columns)}")
    return tuple(np.atleast_1d(data[c]) for c in columns)


def _grid(h: np.ndarray, v: np.ndarray, val: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    gh, gv = np.unique(h), np.unique(v)
    tab = np.full((gv.size, gh.size), np.nan)
    tab[np.searchsorted(gv, v), np.searchsorted(gh, h)] = val
    if np.isnan(tab).any():
        raise SystemExit("profile table is not a full grid of h_mrad x v_mrad")
    return gh, gv, tab


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", required=True, help="preset to start from (name or TOML file)")
    ap.add_argument("--profile", help="beam profile CSV: h_mrad,v_mrad,value")
    ap.add_argument("--intensity", help="intensity CSV: range_m,reflectivity,power_w")
    ap.add_argument("--epw", help="echo pulse width CSV: power_w,epw_ns")
    ap.add_argument("--demo", action="store_true", help="use synthetic tables from the preset itself")
    ap.add_argument(
        "--store-table", action="store_true", help="keep the measured profile as the beam profile"
    )
    ap.add_argument("--out", required=True, help="calibrated preset file to write")
    args = ap.parse_args(argv)
    preset = load_preset(args.preset)
    o = preset.optics
    prof = inten = epw_tab = None
    if args.demo:
        prof = synthetic_profile_table(o.beam_divergence_h_mrad, o.beam_divergence_v_mrad, noise=0.01)
        inten = synthetic_intensity_table(preset, noise=0.02)
        epw_tab = synthetic_epw_table(preset, noise_ns=0.1)
    if args.profile:
        prof = _grid(*read_csv(args.profile, ("h_mrad", "v_mrad", "value")))
    if args.intensity:
        inten = read_csv(args.intensity, ("range_m", "reflectivity", "power_w"))  # type: ignore[assignment]
    if args.epw:
        epw_tab = read_csv(args.epw, ("power_w", "epw_ns"))  # type: ignore[assignment]
    if prof is None and inten is None and epw_tab is None:
        ap.error("give at least one of --profile, --intensity, --epw (or --demo)")
    beam = fit_beam_profile(*prof) if prof is not None else None
    power = fit_power(*inten, o.receiver_aperture_m, o.system_efficiency) if inten is not None else None
    epw = fit_epw(*epw_tab, preset.pulse.detection_threshold_w) if epw_tab is not None else None
    out = calibrate(preset, beam, power, epw, profile_table=prof if args.store_table else None)
    Path(args.out).write_text(preset_toml(out))
    fits = {k: dataclasses.asdict(v) for k, v in (("beam", beam), ("power", power), ("epw", epw)) if v}
    print(json.dumps({"fits": fits, "out": args.out}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
