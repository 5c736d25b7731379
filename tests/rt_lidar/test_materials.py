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


def test_lobes_conserve_energy() -> None:
    """Issue 14 item 6: no material reflects more than it receives; chrome's lobe integrated to 2.0."""
    from rt_lidar.sensor.materials import lobe_albedo

    assert lobe_albedo(500.0, 2000.0) == pytest.approx(2.0, rel=0.01)  # the old chrome
    table = load_material_table()
    for name, m in table.materials.items():
        total = float(m["spectrum"].max()) + lobe_albedo(
            float(m.get("specular_gain", 0.0)),
            float(m.get("specular_exponent", 1.0)),
            float(m.get("retro_gain", 0.0)),
        )
        assert total <= 1.0, name
    chrome = table.materials["chrome"]
    assert lobe_albedo(chrome["specular_gain"], chrome["specular_exponent"]) == pytest.approx(0.6, abs=0.05)
    paint = table.materials["car_paint_red"]
    assert lobe_albedo(paint["specular_gain"], paint["specular_exponent"]) == pytest.approx(0.04, abs=0.01)
    assert table.reflectance("bark", 905.0) == pytest.approx(0.35, abs=0.05)


def test_a_lobe_that_creates_energy_is_refused(tmp_path) -> None:
    from importlib import resources

    text = resources.files("rt_lidar.sensor_presets").joinpath("materials.toml").read_text()
    bad = text.replace("specular_gain = 150.0", "specular_gain = 500.0", 1)
    path = tmp_path / "materials.toml"
    path.write_text(bad)
    with pytest.raises(ConfigError, match=r"chrome.*reflects 2"):
        load_material_table(path)
