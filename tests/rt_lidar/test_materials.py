from pathlib import Path

import pytest

from rt_lidar.errors import ConfigError
from rt_lidar.sensor.materials import load_material_table

SPECTRA = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "spectra"


def test_packaged_table_loads_and_differs_by_wavelength():
    table = load_material_table()
    assert {"asphalt", "glass", "plate_sheeting", "vegetation", "lane_paint"} <= set(table.names)
    # leaves are bright at 905 nm and much darker at 1550 nm (water absorption)
    assert table.reflectance("vegetation", 905) > 1.5 * table.reflectance("vegetation", 1550)
    assert 0.2 < table.reflectance("asphalt", 905) < 0.35
    arr = table.arrays(["asphalt", "glass"], 905)
    assert arr.transmission.tolist()[1] > 0.5 and arr.transmission.tolist()[0] == 0.0


@pytest.mark.skipif(not SPECTRA.is_dir(), reason="../shared/reference/spectra not present")
def test_spectra_match_the_aster_files():
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_spectra", Path("tools/import_spectra.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    wl, refl = mod.read_aster(SPECTRA / "asphalt.txt")
    table = load_material_table()
    import numpy as np

    assert table.reflectance("asphalt", 905) == pytest.approx(float(np.interp(905, wl, refl)), abs=0.002)


def test_bad_tables_name_the_field(tmp_path):
    good = load_material_table()
    n = len(good.wavelengths_nm)
    wl = ", ".join(str(float(w)) for w in good.wavelengths_nm)
    bad = tmp_path / "m.toml"
    bad.write_text(
        f"spectrum_nm = [{wl}]\n[materials.x]\nspectrum = [{', '.join(['0.5'] * n)}]\nretro_gain = -1\n"
    )
    with pytest.raises(
        ConfigError, match=r"m.toml: field 'materials.x.retro_gain': must be in \[0, 100000\], got -1"
    ):
        load_material_table(bad)
    bad.write_text(f"spectrum_nm = [{wl}]\n[materials.x]\nspectrum = [0.5]\n")
    with pytest.raises(ConfigError, match=r"materials\.x\.spectrum"):
        load_material_table(bad)
    bad.write_text(
        f"spectrum_nm = [{wl}]\n[materials.x]\nspectrum = [{', '.join(['0.5'] * n)}]\ncolour = 1\n"
    )
    with pytest.raises(
        ConfigError, match=r"field 'materials\.x\.colour': unknown key; allowed keys: spectrum"
    ):
        load_material_table(bad)
    with pytest.raises(ConfigError, match="scene uses materials not in the table: unobtainium"):
        good.arrays(["asphalt", "unobtainium"], 905)
