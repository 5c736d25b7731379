"""Each laser's own receiver focus (``Beam.receiver_focus_m``; docs/realism.md change 29): read from a
Velodyne calibration's ``focal_distance``, given in a preset's ``[[beams]]``, the preset-wide
``optics.receiver_focus_m`` the default."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.api import in_process_pipeline
from rt_lidar.config import RunConfig
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.receiver_focus import beam_inverse_focus, hard_target_share
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import SensorPreset, list_presets, load_preset, preset_to_dict
from rt_lidar.sensor.vendor import preset_from_vendor_file
from rt_lidar.sensor.vendor.velodyne import parse_velodyne_yaml

ROOT = Path(__file__).resolve().parents[2]
VELODYNE = ROOT / "tests" / "data" / "vendor" / "velodyne"


def test_a_calibrations_focal_distance_becomes_each_lasers_focus() -> None:
    """An HDL-64E S3 calibration gives every laser its ``focal_distance`` (0.25-24 m): the preset built
    from it carries each as that laser's ``receiver_focus_m``, and says so in its provenance."""
    path = VELODYNE / "64e_s3-xiesc.yaml"
    lasers, _ = parse_velodyne_yaml(path.read_text())
    preset = preset_from_vendor_file(str(path))
    by_id = {b.laser_id: b for b in preset.beams}
    focal = {int(las["laser_id"]): las["focal_distance"] for las in lasers}
    assert len(set(focal.values())) > 10
    for lid, f in focal.items():
        assert by_id[lid].receiver_focus_m == pytest.approx(f)
    assert "focal_distance" in preset_to_dict(preset)["provenance"]["beams.receiver_focus_m"]
    inv = beam_inverse_focus(preset)
    assert inv is not None
    for b in preset.beams:
        assert inv[b.ring] == pytest.approx(1.0 / focal[int(b.laser_id or 0)])


def test_a_calibration_without_focal_distance_leaves_the_preset_wide_focus() -> None:
    """The S2 file of the shipped HDL-64E (``focal_distance: 0`` throughout) sets no beam's focus."""
    preset = preset_from_vendor_file(str(VELODYNE / "64e_utexas.yaml"))
    assert all(b.receiver_focus_m is None for b in preset.beams)
    assert beam_inverse_focus(preset) is None


def test_presets_without_a_focus_of_their_own_keep_the_path_factors_focus_alone() -> None:
    """Every shipped preset but the HDL-64E sets no beam focus: no per-beam factor at all (their bytes)."""
    for name in list_presets():
        preset = load_preset(name)
        own = beam_inverse_focus(preset)
        assert (own is not None) == (name == "HDL-64E"), name


def _hdl64(lower_focus: float | None) -> SensorPreset:
    preset = load_preset("HDL-64E")
    beams = tuple(
        dataclasses.replace(b, receiver_focus_m=lower_focus if b.receiver_focus_m is not None else None)
        for b in preset.beams
    )
    return dataclasses.replace(preset, beams=beams)


def test_the_hdl64e_lower_block_is_focused_nearer_than_the_upper() -> None:
    """The shipped HDL-64E: the lower block (laser ids 32-63, below -8.7 deg) at the S3 unit's 11.2 m,
    the upper block at the preset-wide 15 m."""
    preset = load_preset("HDL-64E")
    for b in preset.beams:
        lower = (b.laser_id or 0) >= 32
        assert (b.receiver_focus_m == pytest.approx(11.2)) if lower else b.receiver_focus_m is None
        assert (b.elevation_deg < -8.7) == lower
    assert preset.optics.receiver_focus_m == 15.0


def test_a_beams_own_focus_scales_its_echoes_by_the_ratio_of_the_two_foci() -> None:
    """A lower-block echo is ``eta(R, 11.2 m) / eta(R, 15 m)`` of the preset-wide one (the receiver's
    share at either focus, change 57: more at 5-9 m, less within 4 m where the parallax grows with
    ``F / (F - R)``, 1 from ~9 m on); an upper-block echo is unchanged (every laser's gain 1 here: change
    42's spread off)."""
    preset = load_preset("HDL-64E")
    preset = dataclasses.replace(preset, receiver=dataclasses.replace(preset.receiver, laser_gain_spread=0.0))
    echo = EchoModel(preset, load_material_table().arrays(["asphalt"], preset.optics.wavelength_nm))
    lower = next(b.ring for b in preset.beams if b.receiver_focus_m is not None)
    upper = next(b.ring for b in preset.beams if b.receiver_focus_m is None)
    r = np.array([2.0, 4.0, 6.0, 8.0, 11.2, 14.0, 20.0, np.inf], np.float32)
    ratio = echo.beam_focus(np.full(r.size, lower), r)
    assert ratio is not None
    exact = r[:-1].astype(float)
    expected = hard_target_share(preset, 11.2, exact) / hard_target_share(preset, 15.0, exact)
    np.testing.assert_allclose(ratio[:-1], expected, rtol=2e-3)  # the table's interpolation
    assert ratio[0] < 0.9 and ratio[2] > 1.04 and np.all(ratio[4:] == 1.0)
    assert np.all(echo.beam_focus(np.full(r.size, upper), r) == 1.0)


def _lower_block_near_road(preset: SensorPreset, device: str = "cpu") -> tuple[float, float]:
    config = RunConfig(preset="HDL-64E", seed=1, in_process=True, device=device)
    built = in_process_pipeline(config, preset)
    try:
        pts = built.pipeline.scans(1)[0].points
    finally:
        built.pipeline.close()
    rings = [b.ring for b in load_preset("HDL-64E").beams if (b.laser_id or 0) >= 32]
    r = np.sqrt(pts["x"] ** 2 + pts["y"] ** 2 + pts["z"] ** 2)
    sel = np.isin(pts["ring"], rings) & (r >= 6.0) & (r < 9.0)
    assert sel.sum() > 5000
    return float(np.mean(pts["intensity"][sel] == 0)), float(np.median(pts["reflectivity"][sel]))


def test_the_lower_blocks_nearer_focus_keeps_its_near_road_out_of_the_zeros() -> None:
    """HDL-64E street scan, lower block at 6-9 m (mostly road): at either focus the near road keeps out
    of the zeros (KITTI's lower block: 0-1 %), while calibrated reflectivity, which divides each laser's
    focus out, reads the same."""
    zeros_own, refl_own = _lower_block_near_road(load_preset("HDL-64E"))
    zeros_wide, refl_wide = _lower_block_near_road(_hdl64(None))
    # change 57: the receiver's share at 6-9 m is 0.63-1 at either focus (0.07 % zeros at both; with the
    # 2 mrad detector of changes 24-29, 0.27 % at 11.2 m against 0.72 % at 15 m)
    assert zeros_own < 0.005 and zeros_wide < 0.005
    assert refl_own == pytest.approx(refl_wide, rel=0.01)


def test_the_device_frame_applies_each_lasers_focus_as_the_host_does() -> None:
    """``--device`` (its CPU twin here): the lower block's near road keeps out of the zeros and reads the
    host's calibrated reflectivity (without the per-laser focus on the device: 1.5 % zeros)."""
    zeros_host, refl_host = _lower_block_near_road(load_preset("HDL-64E"))
    zeros_dev, refl_dev = _lower_block_near_road(load_preset("HDL-64E"), "cuda-source-on-cpu")
    assert zeros_dev < 0.005 and zeros_dev == pytest.approx(zeros_host, abs=0.002)
    assert refl_dev == pytest.approx(refl_host, rel=0.01)


def test_the_import_tool_writes_the_s3_units_lower_block_focus(tmp_path: Path) -> None:
    """``tools/import_calibrations.py`` gives the HDL-64E's lower block the median focal_distance of the
    S3 unit's lower-block lasers focused at 9 m or more (11.2 m), from the vendored calibration files."""
    spec = importlib.util.spec_from_file_location(
        "import_calibrations", ROOT / "tools" / "import_calibrations.py"
    )
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    lasers, _ = parse_velodyne_yaml((VELODYNE / "64e_s3-xiesc.yaml").read_text())
    lower = sorted(las["focal_distance"] for las in lasers if las["laser_id"] >= 32)
    kept = [f for f in lower if f >= 9.0]
    assert len(kept) == 19 and max(f for f in lower if f < 9.0) <= 5.0
    preset = tool.build("hdl-64e", VELODYNE, tmp_path)
    for b in preset["beams"]:
        if b["laser_id"] >= 32:
            assert b["receiver_focus_m"] == pytest.approx(float(np.median(kept))) == pytest.approx(11.2)
        else:
            assert "receiver_focus_m" not in b
