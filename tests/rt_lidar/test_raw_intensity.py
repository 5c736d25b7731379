"""The HDL-64E S2 reports an uncalibrated 8-bit intensity, and KITTI's files hold it in steps of 0.01
(docs/realism.md, change 36): the preset's reading, the file's conversion, and the road of the demo street
as KITTI's frame 000008 shows its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rt_lidar.errors import PresetError
from rt_lidar.kernels import raw_intensity_output
from rt_lidar.physics.intensity_chain import reported_intensity
from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.real_frames import shared_real_dir
from rt_lidar.validation.realism import realism_statistics
from rt_lidar.validation.realism_experiment import simulated_grids
from rt_lidar.validation.realism_grid import KITTI_STEP, kitti_file_intensity

SHARED = shared_real_dir()
KITTI_BIN = SHARED / "kitti_000008" if SHARED is not None else Path("absent")


def test_the_s2_reads_its_byte_on_its_own_gain_without_a_calibrated_scale() -> None:
    s2 = load_preset("HDL-64E")
    assert s2.output.intensity == "raw_intensity"
    thr = s2.pulse.detection_threshold_w
    refl = np.array([0.06, 0.12, 0.24, 0.8, 300.0], np.float32)  # dark, road, twice the road, white, sheeting
    got = reported_intensity(s2, np.full(5, 100 * thr), refl, np.full(5, 10.0))
    assert np.array_equal(got, np.round(got))  # whole bytes
    # linear in the measured reflectivity: twice the road reads twice its byte (calibrated: 12 and 24 of
    # 0..100, the road a step of 8 %; the S2's byte puts the road near KITTI's 0.30 of its scale)
    assert got[2] == pytest.approx(2 * got[1], abs=1)
    assert 70 <= got[1] <= 82
    # above the knee the byte compresses toward 255: white paint reads under it, sheeting reaches it
    assert s2.output.raw_knee is not None and got[2] < s2.output.raw_knee < got[3] < 255 and got[4] == 255


def test_the_s2s_byte_is_linear_to_its_knee_then_compresses_toward_255() -> None:
    knee, gain = 160.0, 630.0
    x = np.linspace(0.0, 1000.0, 100_001)  # the linear reading, bytes
    got = raw_intensity_output(x / gain, gain, 255, knee)
    below = x <= knee
    assert np.allclose(got[below], x[below])
    assert np.all(np.diff(got) >= 0) and got.max() <= 255
    slope = np.diff(got) / np.diff(x)
    assert slope[below[1:]].min() == pytest.approx(1.0)
    assert np.all(slope[~below[1:]] < 1.0) and slope[-1] < 0.01  # compressed, flattening at the top
    assert np.abs(np.diff(got)).max() < 0.011  # continuous at the knee
    assert got[np.searchsorted(x, 504.0)] < 254.5 < got[-1]  # white paint (0.8) rounds under 255, 1.6 to it
    lin = raw_intensity_output(x / gain, gain, 255)
    assert np.allclose(lin, np.minimum(x, 255))  # no knee: linear and clipped


def test_raw_gain_belongs_to_raw_intensity(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parents[2] / "sensor_presets" / "hdl-64e.toml"
    text = src.read_text()
    for bad_text in (
        text.replace('intensity = "raw_intensity"', 'intensity = "calibrated_reflectivity"', 1),
        "\n".join(ln for ln in text.splitlines() if not ln.startswith("raw_gain")) + "\n",
        text.replace("raw_knee = 160.0", "raw_knee = 255.0", 1),
    ):
        bad = tmp_path / "s2.toml"
        bad.write_text(bad_text)
        with pytest.raises(PresetError, match=r"raw_gain|raw_knee"):
            load_preset(bad)


def test_kitti_files_hold_the_byte_in_hundredths_with_255_at_099() -> None:
    byte = np.arange(256)
    f = kitti_file_intensity(byte)
    assert f[0] == 0 and f[255] == pytest.approx(0.99) and f.max() == pytest.approx(0.99)
    assert np.allclose(f / KITTI_STEP, np.round(f / KITTI_STEP))
    assert np.all(np.diff(f) >= 0)
    assert len(np.unique(np.round(f, 6))) == 100  # every hundredth 0.00-0.99 is reachable


@pytest.mark.skipif(not (KITTI_BIN / "velodyne_000008.bin").exists(), reason="../shared absent")
def test_kittis_frame_sits_on_hundredths_up_to_099() -> None:
    a = np.fromfile(KITTI_BIN / "velodyne_000008.bin", np.float32).reshape(-1, 4)[:, 3].astype(np.float64)
    assert np.abs(a / KITTI_STEP - np.round(a / KITTI_STEP)).max() < 1e-3
    assert a.max() == pytest.approx(0.99) and np.mean(a == np.float32(0.99)) > 0.003  # the clip's pile


def test_the_simulated_s2s_road_reads_as_kittis_in_its_units() -> None:
    grids = simulated_grids("HDL-64E", frames=1)
    assert all(g.step == KITTI_STEP for g in grids)
    s = realism_statistics(grids[0])
    # the near road at KITTI's 0.30 (fitted: output.raw_gain); before, 12 on 0..100
    assert 0.27 <= s["ground_intensity_by_band"][0] <= 0.33
    # KITTI's frame: 0.70 at its step of 0.01 (a relative step of 3 %); before: 0.51 at calibrated
    # reflectivity's step of 1 on a road at 12 (8 %); 0.65 with independent 3 cm cells (change 36), 0.57-0.58
    # with the texture averaged over each footprint (change 46: a residual of -0.13, docs/realism.md)
    assert 0.5 <= s["ground_texture_share"] <= 0.8
    assert 0.4 <= s["zero_share_beyond_40m"] <= 0.75  # the S2's zeros survive the conversion
    # KITTI's frame holds 0.67 % of its returns at 0.99 (the byte's 255); a linear byte clipped at 255 put
    # 10 % of the street's there (every surface over 0.40 of reflectivity); the compression leaves the
    # retro-reflectors: under twice KITTI's share, and not none
    at_top = float(np.mean(grids[0].intensity[grids[0].returned] >= 0.985))
    assert 0.001 <= at_top <= 0.015


def test_diffuse_max_belongs_to_calibrated_reflectivity(tmp_path: Path) -> None:
    """diffuse_max scales only a calibrated reading: on another kind it would be ignored, so it is refused."""
    src = Path(__file__).resolve().parents[2] / "sensor_presets" / "hdl-64e.toml"
    bad = tmp_path / "s2.toml"
    bad.write_text(
        src.read_text().replace("intensity_max = 255", "intensity_max = 255\ndiffuse_max = 100", 1)
    )
    with pytest.raises(
        PresetError, match=r'output\.diffuse_max.*calibrated_reflectivity.*not "raw_intensity"'
    ):
        load_preset(bad)
