"""The realism statistics (issue 40): on synthetic grids whose answer is known, on the real frames of the
shared reference (KITTI's HDL-64E, an Ouster OS1-64 read back by ouster-sdk too), and on simulated scans."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from peers import needs_peer, peer_python
from real_frames import REAL

from rt_lidar.validation.realism import realism_statistics
from rt_lidar.validation.realism_grid import (
    ScanGrid,
    grid_from_points,
    read_kitti_bin,
    read_ouster_legacy_pcap,
)

PEER = peer_python("ouster")
needs_real = pytest.mark.skipif(REAL is None, reason="../shared/reference/real absent")


def _ring_directions() -> np.ndarray:
    """(32, 1000, 3) unit directions: 32 rings from -25 to -1 deg, 1,000 columns."""
    el = np.radians(np.linspace(-25, -1, 32))
    az = np.radians(np.arange(1000) * 0.36)
    return np.stack(
        np.broadcast_arrays(
            np.cos(el)[:, None] * np.cos(az), np.cos(el)[:, None] * np.sin(az), np.sin(el)[:, None]
        ),
        -1,
    )


def _flat_ground(intensity_of, drop_beyond_m: float = 1e9, height: float = 1.8, seed: int = 0) -> ScanGrid:
    """A sensor ``height`` over an endless plane: 32 rings from -25 to -1 deg, 1,000 columns; rays whose
    ground range exceeds ``drop_beyond_m`` return nothing."""
    rng = np.random.default_rng(seed)
    d = _ring_directions()
    r = height / -d[..., 2]
    keep = r < drop_beyond_m
    xyz = (d * r[..., None])[keep]
    ring = np.broadcast_to(np.arange(32)[:, None], r.shape)[keep]
    return grid_from_points("flat", xyz, intensity_of(r[keep], rng), ring, 1.0, "counts")


def test_flat_ground_gives_its_falloff_horizon_and_no_texture() -> None:
    g = _flat_ground(lambda r, rng: np.round(100.0 / (1 + r / 10.0)), drop_beyond_m=30.0)
    s = realism_statistics(g)
    assert s["sensor_height_m"] == pytest.approx(1.8, abs=0.02)
    b = s["ground_intensity_by_band"]
    assert b[0] > b[1] > b[2] and b[4] is None
    assert s["ground_falloff_20_30_over_0_10"] == pytest.approx(b[2] / b[0])
    assert 25.0 <= s["ground_horizon_m"] < 30.0  # the farthest ring before the drops begin
    assert s["ground_texture_share"] == pytest.approx(
        0.0, abs=0.02
    )  # smooth in range, so smooth along a ring
    assert s["zero_share_beyond_40m"] is None  # nothing returns beyond 30 m


def test_a_road_rising_beyond_the_fitted_plane_answers_short_of_it() -> None:
    # flat to 20 m, then rising 1 in 100: the plane fitted near the sensor is the flat part's, and the
    # ring aimed at that plane 58 m away meets the rising road at 49 m. The plane's horizon overstates how far
    # the road answers; the returned horizon is where it did (as on KITTI's frame: 67 m against 55 m).
    flat = realism_statistics(_flat_ground(lambda r, rng: np.full(r.size, 30.0), drop_beyond_m=60.0))
    assert flat["ground_horizon_returned_m"] == pytest.approx(flat["ground_horizon_m"], rel=0.02)
    d = _ring_directions()
    tan_g = -d[..., 2] / np.hypot(d[..., 0], d[..., 1])  # grazing slope of each ray
    horiz = np.where(1.8 / tan_g <= 20.0, 1.8 / tan_g, (1.8 + 0.01 * 20.0) / (tan_g + 0.01))
    r = horiz * np.sqrt(1.0 + tan_g**2)
    keep = horiz < 50.0  # the rising road answers out to 50 m along the ground
    xyz = (d * r[..., None])[keep]
    ring = np.broadcast_to(np.arange(32)[:, None], r.shape)[keep]
    g = grid_from_points("rising", xyz, np.full(int(keep.sum()), 30.0), ring, 1.0, "counts")
    s = realism_statistics(g)
    assert s["ground_horizon_m"] > 55.0  # the farthest answering ring's range to the flat plane
    assert 46.0 < s["ground_horizon_returned_m"] < 50.5  # where the rising road answered it
    assert all(len(row) == 4 for row in s["horizon_rings"])


def test_the_horizon_in_kittis_view_is_the_road_ahead() -> None:
    # the ground ahead (within 45 deg of the heading) answers to 30 m, the ground behind to 60 m: the
    # whole turn's horizon is the ground behind's, that of the rays in a forward camera's view (KITTI's
    # frame is that crop) the road ahead's (change 31: the demo street's concrete slab behind the sensor)
    from rt_lidar.validation.realism_experiment import _measure

    d = _ring_directions()
    r = 1.8 / -d[..., 2]
    ahead = np.abs(np.degrees(np.arctan2(d[..., 1], d[..., 0]))) < 45.0
    keep = r < np.where(ahead, 30.0, 60.0)
    ring = np.broadcast_to(np.arange(32)[:, None], r.shape)[keep]
    g = grid_from_points(
        "ahead", (d * r[..., None])[keep], np.full(int(keep.sum()), 30.0), ring, 1.0, "counts"
    )
    camera = {  # a pinhole 1242 x 375 pixels looking along +x (f = 700 px: +-41.6 deg, +-15 deg)
        "P2": np.array([700.0, 0, 621, 0, 0, 700, 187, 0, 0, 0, 1, 0]),
        "R0_rect": np.eye(3).ravel(),
        "Tr_velo_to_cam": np.array([0.0, -1, 0, 0, 0, 0, -1, 0, 1, 0, 0, 0]),
    }
    s = _measure(g, camera)
    assert s["ground_horizon_m"] > 55.0  # behind: the ring 58 m out answers on three quarters of the turn
    assert 24.0 < s["view_horizon_m"] < 30.0  # ahead: the farthest ring before 30 m
    assert s["view_horizon_returned_m"] == pytest.approx(s["view_horizon_m"], rel=0.02)  # a flat road
    assert _measure(g)["view_horizon_m"] is None  # no camera, no view


def _road_with_a_low_wall(noise_m: float = 0.0) -> tuple[ScanGrid, int]:
    """(grid, the road's returns): the flat ground of :func:`_flat_ground` (100 counts within 10 m, 70 to
    20 m, 40 beyond) with a dark wall (5 counts) 0.6 m high standing 20 m out over three quarters of the
    turn, a row of parked cars' tyres and sills: of each column there, the ring 4.9 deg down meets it 0.1 m
    up, within the ground plane's tolerance (0.1 m + 0.5 % of range), the ring above 0.37 m up."""
    rng = np.random.default_rng(3)
    d = _ring_directions()
    horiz = np.hypot(d[..., 0], d[..., 1])
    r_ground = 1.8 / -d[..., 2]
    walled = (np.arange(1000) < 750)[None, :] & (r_ground * horiz > 20.0)
    z_wall = 1.8 + 20.0 / horiz * d[..., 2]  # height above the ground where the ray meets the wall
    on_wall = walled & (z_wall <= 0.6)
    r = np.where(on_wall, 20.0 / horiz, r_ground) + noise_m * rng.standard_normal(r_ground.shape)
    inten = np.where(on_wall, 5.0, np.select([r_ground < 10, r_ground < 20], [100.0, 70.0], 40.0))
    keep = r_ground < 30.0
    ring = np.broadcast_to(np.arange(32)[:, None], r.shape)[keep]
    g = grid_from_points("wall", (d * r[..., None])[keep], inten[keep], ring, 1.0, "counts")
    return g, int((keep & ~on_wall).sum())


def test_the_feet_of_what_stands_on_the_road_are_not_its_intensity() -> None:
    # the wall's lowest hits lie within the plane's tolerance: counted as ground they made the 20-30 m
    # band the wall's 5 counts (750 feet against 500 road points), where the road reads 40 (change 62:
    # parked cars' tyres and sills on the demo street, walls and kerbs on the real frames)
    g, road = _road_with_a_low_wall()
    s = realism_statistics(g)
    assert s["ground_surface_points"] == road
    assert s["ground_points"] == road + 750  # within the plane's tolerance: the horizon's ground, as before
    assert s["ground_intensity_by_band"][:3] == [100.0, 70.0, 40.0]
    assert s["ground_falloff_20_30_over_0_10"] == pytest.approx(0.4)


def test_a_flat_road_with_range_noise_loses_no_point_as_a_foot() -> None:
    # range noise of 2 cm (the HDL-64E's datasheet accuracy, the OS1-64's 1.5 cm): neighbouring rings
    # on a flat road do not rise 5 cm more steeply than 45 deg (3 cm would, 2 points in 32,000)
    plain = _flat_ground(lambda r, rng: np.full(r.size, 30.0))
    d = plain.xyz / plain.range_m[..., None]
    noisy_r = plain.range_m + 0.02 * np.random.default_rng(5).standard_normal(plain.range_m.shape)
    ring = np.broadcast_to(np.arange(plain.range_m.shape[0])[:, None], plain.range_m.shape)
    ok = plain.returned
    g = grid_from_points("noisy", (d * noisy_r[..., None])[ok], plain.intensity[ok], ring[ok], 1.0, "counts")
    assert realism_statistics(g)["ground_surface_points"] == int(ok.sum())
    wall, road = _road_with_a_low_wall(noise_m=0.02)
    assert realism_statistics(wall)["ground_surface_points"] == road


def test_texture_and_zeros_move_with_the_scan() -> None:
    speckled = realism_statistics(_flat_ground(lambda r, rng: np.round(50 + 5 * rng.standard_normal(r.size))))
    assert speckled["ground_texture_share"] > 0.5
    zeros = realism_statistics(_flat_ground(lambda r, rng: np.where(r > 40, 0.0, 30.0)))
    assert zeros["zero_share_beyond_40m"] == 1.0
    again = realism_statistics(_flat_ground(lambda r, rng: np.round(50 + 5 * rng.standard_normal(r.size))))
    assert again == speckled  # deterministic


@needs_real
def test_kitti_frame_statistics() -> None:
    assert REAL is not None
    k = REAL / "kitti_000008"
    g = read_kitti_bin(k / "velodyne_000008.bin", k / "calib.txt")
    assert int(g.returned.sum()) == 17_238  # every point on the grid, one a cell
    s = realism_statistics(g)
    assert 1.6 < s["sensor_height_m"] < 2.0  # KITTI's HDL-64E sits 1.73 m up
    assert s["ground_horizon_m"] >= 60.0  # realism-statistics.md: >= 64 m
    # ... to the plane fitted near the car; the road rises beyond it, and the ring aimed 67 m out at the
    # plane answers from the road 52-58 m away: the HDL-64E S2 sees this road to ~55 m
    assert 50.0 <= s["ground_horizon_returned_m"] <= 60.0
    # on its own road, each laser along its own line (0.2 m above the frame's origin: change 64), the
    # horizon is where the road answered; where the road is level, nearer, at 2-3 deg of grazing
    assert 50.0 <= s["ground_horizon_local_m"] <= 60.0
    assert 40.0 <= s["ground_horizon_level_m"] <= s["ground_horizon_local_m"]
    assert 2.0 <= s["grazing_at_level_horizon_deg"] <= 3.0
    assert 0.12 <= s["ground_texture_share"] <= 0.84
    assert 0.4 <= s["zero_share_beyond_40m"] <= 0.8  # the S2 reports ~half its far returns as 0
    assert 0.10 <= s["hole_share"] <= 0.25  # 0.164: the highest of 13 KITTI frames (median 0.024, change 55)
    assert s["holes_near_object_share"] > 0.5  # holes in near cars, not far grazing road


@needs_real
@needs_peer("ouster")
def test_ouster_frame_matches_ouster_sdk(tmp_path: Path) -> None:
    assert REAL is not None
    o = REAL / "ouster_os1_64"
    pcap, meta = o / "OS-1-64_1024x10_fw20.pcap", o / "OS-1-64_sensor_config_reduced.json"
    g = read_ouster_legacy_pcap(pcap, meta)
    script = tmp_path / "read.py"
    script.write_text(
        "import sys, numpy as np\n"
        "from ouster.sdk import open_source\n"
        "from ouster.sdk.core import ChanField, destagger\n"
        "src = open_source(sys.argv[1], meta=[sys.argv[2]], index=False)\n"
        "scans = [fs[0] for fs in src]\n"
        "s = max(scans, key=lambda s: int((s.field(ChanField.RANGE) > 0).sum()))\n"
        "np.savez(sys.argv[3], r=s.field(ChanField.RANGE), sig=s.field(ChanField.SIGNAL))\n"
    )
    out = tmp_path / "sdk.npz"
    subprocess.run(
        [str(PEER), str(script), str(pcap), str(meta), str(out)], check=True, timeout=120, capture_output=True
    )
    sdk = np.load(out)
    assert np.array_equal(np.round(g.range_m * 1000).astype(np.int64), sdk["r"].astype(np.int64))
    assert np.array_equal(
        g.intensity.astype(np.int64), np.where(sdk["r"] > 0, sdk["sig"], 0).astype(np.int64)
    )
    assert g.intensity.max() == 1241  # the figure: the real frame's largest signal


def test_validate_realism_reports_every_preset_beside_real_scans(tmp_path: Path) -> None:
    from rt_lidar.validation.realism_experiment import REALISM_PRESETS
    from rt_lidar.validation.report import run_validation, trend_checks

    rep = run_validation(tmp_path, ["realism"])["realism"]
    assert rep["presets"] == list(REALISM_PRESETS)
    for key in ("falloff", "horizon_m", "texture", "zeros40"):
        assert len(rep[f"sim_{key}"]) == len(REALISM_PRESETS) and len(rep[f"residual_{key}"]) == len(
            REALISM_PRESETS
        )
        assert all(v is not None for v in rep[f"sim_{key}"])
    assert (tmp_path / "realism.png").stat().st_size > 20_000  # one column of panels per sensor
    assert "![realism](realism.png)" in (tmp_path / "report.md").read_text()
    vendored = {
        "HDL-32E": ["nuscenes_LIDAR_TOP_1532402927647951.pcd.bin"],
        "VLP-32C": ["av2_up_lidar_315966265259836000.pcd", "vlp32c_nebula_1713492677.pcap"],
        "VLS-128": ["vls128_nebula_1614315746.pcap"],
        "OS1-64": ["OS-1-32-G_v2.1.1_1024x10.pcap"],
    }
    if REAL is not None:
        vendored["HDL-64E"] = ["velodyne_000008.bin"]
        vendored["OS1-64"].insert(0, "OS-1-64_1024x10_fw20.pcap")
        assert rep["residual_real_frame_zeros40"][0] is not None
        # KITTI's frame looks ahead (camera 2's crop): its horizon is set beside the simulated one in
        # the same view (the road ahead), not the whole turn's (the ground behind; change 31)
        kitti = next(sc for sc in rep["real_scans"].values() if sc["kitti_view"])
        ret = kitti["statistics"]["ground_horizon_returned_m"]
        assert kitti["residual"]["horizon_ret"] == pytest.approx(rep["sim_ret_view"][0] - ret)
        assert rep["real_frame_ret_view"][0] == pytest.approx(ret)
        assert all(v is not None for v in rep["sim_ret_view"])  # every preset, in KITTI's camera view
        loc = kitti["statistics"]["ground_horizon_local_m"]  # on its own road (change 64)
        assert kitti["residual"]["horizon_loc"] == pytest.approx(rep["sim_loc_view"][0] - loc)
    # presets without any real frame (the HDL-64E without ../shared) are left out of the listing
    assert rep["real_frames"] == {k: vendored[k] for k in REALISM_PRESETS if k in vendored}
    for sc in rep["real_scans"].values():  # every real scan measured, its residuals stated
        assert sc["residual"]["zeros40"] is not None or sc["statistics"]["zero_share_beyond_40m"] is None
        assert (sc["statistics"]["ground_horizon_m"] is None) == (not sc["outdoor"])
    assert all(ok for _, ok in trend_checks({"realism": rep})["realism"])


def test_validate_prints_simulated_beside_real(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from rt_lidar.cli.validate import add_validate_parser

    p = argparse.ArgumentParser()
    add_validate_parser(p.add_subparsers())
    args = p.parse_args(["validate", "--out", str(tmp_path), "--only", "realism"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "preset   statistic   simulated real frame   published  residual" in out
    # falloff, horizon_m, horizon_ret (where the road answered at the horizon), texture, zeros40, the
    # horizon in KITTI's camera view (to the plane, returned: change 31), the road echo's slope read back
    # from the lasers' zeros, read from P and the zeros together, and the model's own (change 52), and the
    # receiver gain the road asks at the 10 % range (change 56), the horizon on the scan's own road and
    # where it is level, over the whole turn and in KITTI's view (change 64)
    assert sum(line.startswith("HDL-64E  ") for line in out.splitlines()) == 15
    slope = next(line.split() for line in out.splitlines() if line.startswith("HDL-64E  echo_slope"))
    joint = next(line.split() for line in out.splitlines() if line.startswith("HDL-64E  echo_joint"))
    model = next(line.split() for line in out.splitlines() if line.startswith("HDL-64E  echo_model"))
    assert float(model[2]) < -3.0  # the model's road echo over 35-55 m ...
    assert float(slope[2]) > float(model[2]) + 1.5  # ... read back from the simulated zeros: flat
    # ... from P and the zeros together it falls again where three lasers' zeros lie in their echoes' body:
    # at the level 3.3 the street's scans keep one each (ring 48, 33.5 m), so none is printed (change 70;
    # tests/rt_lidar/test_road_echo_terms.py reads the street's road back at 2.1 and 3.3 together)
    assert joint[2] == "-"
    assert slope[3] == "-" or float(slope[3]) > -1.0  # ... and KITTI's lasers' (where its frame is here),
    assert joint[3] == "-" or float(joint[3]) > -1.0  # either way
    gain = next(line.split() for line in out.splitlines() if line.startswith("HDL-64E  gain_r10"))
    assert gain[2] == "-" or float(gain[2]) < 1.6  # the model's scan reads about its lasers' own gains
    assert gain[3] == "-" or float(gain[3]) > 2.0  # KITTI's road asks more than any range-only term gives


def test_without_the_real_frames_their_checks_are_not_run_and_that_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rt_lidar.validation.realism_experiment as experiment
    from rt_lidar.validation.report import run_validation, trend_checks

    monkeypatch.setattr(experiment, "_shared_real", lambda: None)
    with pytest.warns(UserWarning, match=r"reference/real not found: KITTI's HDL-64E frame and the Ouster"):
        rep = run_validation(tmp_path, ["realism"])
    assert "HDL-64E" not in rep["realism"]["real_frames"]
    assert "KITTI HDL-64E" not in rep["realism"]["real_scans"]  # the vendored frames are still used
    assert trend_checks(rep) == {"realism": []}  # not run: neither passed nor failed
    assert "KITTI frame" not in (tmp_path / "report.md").read_text()
