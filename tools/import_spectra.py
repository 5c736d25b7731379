"""Write the reflectance spectra of sensor_presets/materials.toml from the ASTER spectral library files.

Usage: python tools/import_spectra.py --spectra ../shared/reference/spectra \
       --materials sensor_presets/materials.toml

Each material of the table that names an ASTER ``spectrum_source`` gets its ``spectrum`` replaced by
the measured hemispherical reflectance sampled at the wavelengths lidars use (800..1600 nm every 25 nm),
converted from percent to a fraction. Materials without a source keep their hand-set spectrum.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

import numpy as np

SAMPLE_NM = np.arange(800.0, 1601.0, 25.0)


def read_aster(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Wavelengths (nm) and reflectance (0..1) of an ASTER library text file, sorted by wavelength."""
    rows: list[tuple[float, float]] = []
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split()
        if (
            len(parts) == 2
            and re.fullmatch(r"[0-9.eE+-]+", parts[0])
            and re.fullmatch(r"[0-9.eE+-]+", parts[1])
        ):
            rows.append((float(parts[0]) * 1000.0, float(parts[1]) / 100.0))
    if not rows:
        raise ValueError(f"{path}: no 'wavelength_um reflectance_percent' rows found")
    arr = np.array(sorted(rows))
    return arr[:, 0], arr[:, 1]


def _fmt_list(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{v:.4f}" for v in values) + "]"


def rewrite(materials_path: Path, spectra_dir: Path) -> int:
    """Replace the ``spectrum`` of every material that has a ``spectrum_source``; returns the count."""
    table = tomllib.loads(materials_path.read_text())
    text = materials_path.read_text()
    changed = 0
    for name, mat in table["materials"].items():
        source = mat.get("spectrum_source")
        if not source:
            continue
        wl, refl = read_aster(spectra_dir / f"{source}.txt")
        sampled = np.interp(SAMPLE_NM, wl, refl) * float(mat.get("spectrum_scale", 1.0))
        block = re.compile(rf"(\[materials\.{re.escape(name)}\][^\[]*?)spectrum = \[[^\]]*\]", re.S)
        text, n = block.subn(lambda m, s=sampled: m.group(1) + "spectrum = " + _fmt_list(s), text, count=1)
        if n != 1:
            raise ValueError(f"{materials_path}: material '{name}' has no 'spectrum = [...]' line to replace")
        changed += 1
    header = "spectrum_nm = " + _fmt_list(SAMPLE_NM).replace(".0000", ".0")
    text = re.sub(r"spectrum_nm = \[[^\]]*\]", header, text, count=1)
    materials_path.write_text(text)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spectra", type=Path, default=Path("../shared/reference/spectra"))
    parser.add_argument("--materials", type=Path, default=Path("sensor_presets/materials.toml"))
    args = parser.parse_args(argv)
    n = rewrite(args.materials, args.spectra)
    print(f"updated {n} spectra in {args.materials}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
