"""Real scans vendored under tests/data/real (issue 40, item 6): each read back on its firing grid and held
against another library's decode (velodyne-decoder, ouster-sdk, pypcd4), the format told from the file,
and ``rt-lidar validate --only realism --real PRESET=PATH``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from peers import needs_peer, peer_python

from rt_lidar.errors import ConfigError, RecordingError
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.velodyne import calibration_yaml
from rt_lidar.validation.real_formats import detect_format, read_real_scan
from rt_lidar.validation.real_frames import VENDORED, is_outdoor, parse_real_option, vendored_frames
from rt_lidar.validation.real_velodyne import decode_velodyne_payloads, read_velodyne_pcap
from rt_lidar.validation.realism import realism_statistics
from rt_lidar.validation.realism_grid import read_ouster_legacy_pcap

DATA = Path(__file__).resolve().parents[1] / "data" / "real"
NUSCENES = DATA / "HDL-32E" / "nuscenes_LIDAR_TOP_1532402927647951.pcd.bin"
VLS128 = DATA / "VLS-128" / "vls128_nebula_1614315746.pcap"
VLP32C = DATA / "VLP-32C" / "vlp32c_nebula_1713492677.pcap"
OS1_32 = DATA / "OS1-32" / "OS-1-32-G_v2.1.1_1024x10.pcap"
AV2 = DATA / "VLP-32C" / "av2_up_lidar_315966265259836000.pcd"
OS1_64 = DATA / "OS1-64" / "OS-1-64_1024x10_fw20.pcap"


def test_every_vendored_frame_is_found_and_named_in_the_readme() -> None:
    frames = vendored_frames()
    assert [f.path for f in frames] == [DATA / f for _, f, _ in VENDORED]
    readme = (DATA / "README.md").read_text()
    for f in frames:
        assert f.path.name in readme
        assert f.path.stat().st_size <= 2_000_000


@pytest.mark.parametrize(
    ("pcap", "preset", "model"), [(VLP32C, "VLP-32C", "VLP32C"), (VLS128, "VLS-128", "VLS128")]
)
def test_velodyne_pcap_decodes_as_velodyne_decoder_does(pcap: Path, preset: str, model: str) -> None:
    """Every return (ring by elevation, range to the mm, intensity) equals velodyne-decoder's."""
    vd = pytest.importorskip("velodyne_decoder")
    from rt_lidar.validation.real_velodyne import _data_payloads

    p = load_preset(preset)
    ret = decode_velodyne_payloads(_data_payloads(pcap)[0], p.n_rings)
    elev_of_laser = np.zeros(p.n_rings)
    elev_of_laser[[int(b.laser_id or 0) for b in p.beams]] = p.elevations_deg
    rank = np.argsort(np.argsort(elev_of_laser, kind="stable"), kind="stable")
    got = ret.distance > 0
    ours = np.stack([rank[ret.laser[got]], np.round(ret.distance[got] * 4.0), ret.intensity[got]], 1)
    cfg = vd.Config(max_range=1000.0, min_range=0.0)
    cfg.model = getattr(vd.Model, model)
    cfg.calibration = vd.Calibration.from_string(calibration_yaml(p))
    pts = np.concatenate([q for _, q in vd.read_pcap(str(pcap), cfg)])
    f = vd.PointField
    theirs = np.stack(
        [pts[:, f.ring], np.round(np.linalg.norm(pts[:, :3], axis=1) * 1000.0), pts[:, f.intensity]], 1
    )
    assert ours.shape == theirs.shape
    a = ours[np.lexsort(ours.T[::-1])].astype(np.int64)
    b = theirs[np.lexsort(theirs.T[::-1])].astype(np.int64)
    assert np.array_equal(a, b)


def test_vls128_rotation_on_its_firing_grid() -> None:
    g = read_velodyne_pcap(VLS128)
    rings, cols = g.range_m.shape
    assert rings == 128 and 1780 <= cols <= 1830  # one rotation at 0.2 deg a firing
    assert g.in_view.all()
    assert 0.85 < g.returned.mean() < 0.95
    assert g.range_m.max() < 250.0  # the VLS-128's range
    s = realism_statistics(g)
    assert 1.7 < s["sensor_height_m"] < 2.2  # on a car's roof
    assert is_outdoor(g)
    assert 0.3 <= s["ground_falloff_20_30_over_0_10"] <= 0.8
    assert s["ground_horizon_m"] >= 60.0


def test_vlp32c_sweep_is_its_field_of_view_indoors() -> None:
    g = read_real_scan(VLP32C, "VLP-32C")
    assert g.range_m.shape[0] == 32
    az = np.degrees(np.arctan2(g.direction[0, :, 1], g.direction[0, :, 0]))
    span = np.ptp(np.unwrap(np.radians(az))) * 180 / np.pi
    assert 170.0 < span < 210.0  # the unit's 200 deg field of view, not a full turn
    assert not is_outdoor(g)  # a floor 0.27 m below: no road statistics


def test_nuscenes_sweep_is_its_firing_grid() -> None:
    a = np.fromfile(NUSCENES, np.float32).reshape(-1, 5)
    g = read_real_scan(NUSCENES, "HDL-32E")
    assert g.range_m.shape == (32, a.shape[0] // 32)
    near = np.linalg.norm(a[:, :3], axis=1) < 0.5
    assert int(g.returned.sum()) == int((~near).sum())  # every return on the grid, one a cell
    elev = np.degrees(np.arcsin(g.direction[:, 0, 2]))
    assert np.all(np.diff(elev) > 0) and elev[0] == pytest.approx(-30.67, abs=0.3)  # ring 0 lowest
    s = realism_statistics(g)
    assert 1.7 < s["sensor_height_m"] < 2.0  # nuScenes' roof HDL-32E
    assert 30.0 <= s["ground_horizon_m"] <= 45.0  # realism-statistics.md: HDL-32E ~39 m
    assert 0.12 <= s["ground_texture_share"] <= 0.84


def test_argoverse2_sweep_reads_as_pypcd4_reads_it() -> None:
    pypcd4 = pytest.importorskip("pypcd4")
    theirs = pypcd4.PointCloud.from_path(AV2).numpy(("x", "y", "z", "intensity", "ring"))
    g = read_real_scan(AV2, "VLP-32C")
    assert g.range_m.shape[0] == len(np.unique(theirs[:, 4])) == 32
    assert 1780 <= g.range_m.shape[1] <= 1820  # 0.2 deg a firing at 10 Hz
    # every point lands on the grid, at most one a cell: the same ranges and intensities as pypcd4 reads
    r = np.linalg.norm(theirs[:, :3].astype(np.float64), axis=1)
    assert abs(int(g.returned.sum()) - r.size) <= 0.03 * r.size
    assert np.median(g.range_m[g.returned]) == pytest.approx(np.median(r), rel=0.02)
    assert g.intensity.max() == theirs[:, 3].max()
    s = realism_statistics(g)
    assert 1.8 < s["sensor_height_m"] < 2.2 and is_outdoor(g)
    assert s["ground_horizon_m"] >= 60.0  # realism-statistics.md: VLP-32C >= 67 m
    assert 0.45 <= s["ground_falloff_20_30_over_0_10"] <= 0.76


@pytest.mark.parametrize("with_ring", [True, False])
def test_pcd_written_by_pypcd4_reads_as_the_same_scan(tmp_path: Path, with_ring: bool) -> None:
    pypcd4 = pytest.importorskip("pypcd4")
    a = np.fromfile(NUSCENES, np.float32).reshape(-1, 5)
    names = ("x", "y", "z", "intensity", "ring")[: 5 if with_ring else 4]
    types = (np.float32,) * 4 + (np.uint16,)
    path = tmp_path / "scan.pcd"
    pypcd4.PointCloud.from_points(a[:, : len(names)], names, types[: len(names)]).save(path)
    assert detect_format(path) == "pcd"
    g = read_real_scan(path, "HDL-32E")
    native = realism_statistics(read_real_scan(NUSCENES, "HDL-32E"))
    s = realism_statistics(g)
    far = np.linalg.norm(a[:, :3], axis=1) >= 0.5
    assert g.returned.sum() >= 0.9 * far.sum()  # binned by azimuth: a few points share a cell
    assert s["ground_falloff_20_30_over_0_10"] == pytest.approx(
        native["ground_falloff_20_30_over_0_10"], abs=0.1
    )
    assert s["ground_texture_share"] == pytest.approx(native["ground_texture_share"], abs=0.05)


@needs_peer("ouster")
@pytest.mark.parametrize("pcap", [OS1_32, OS1_64], ids=["OS1-32", "OS1-64"])
def test_ouster_frame_matches_ouster_sdk(tmp_path: Path, pcap: Path) -> None:
    meta = pcap.with_suffix(".json")
    g = read_real_scan(pcap, "OS1-64")  # the metadata found beside the pcap
    script = tmp_path / "read.py"
    script.write_text(
        "import sys, numpy as np\n"
        "from ouster.sdk import open_source\n"
        "from ouster.sdk.core import ChanField\n"
        "src = open_source(sys.argv[1], meta=[sys.argv[2]], index=False)\n"
        "scans = [fs[0] for fs in src]\n"
        "s = max(scans, key=lambda s: int((s.field(ChanField.RANGE) > 0).sum()))\n"
        "np.savez(sys.argv[3], r=s.field(ChanField.RANGE), sig=s.field(ChanField.SIGNAL))\n"
    )
    out = tmp_path / "sdk.npz"
    cmd = [str(peer_python("ouster")), str(script), str(pcap), str(meta), str(out)]
    subprocess.run(cmd, check=True, timeout=120, capture_output=True)
    sdk = np.load(out)
    assert np.array_equal(np.round(g.range_m * 1000).astype(np.int64), sdk["r"].astype(np.int64))
    assert np.array_equal(
        g.intensity.astype(np.int64), np.where(sdk["r"] > 0, sdk["sig"], 0).astype(np.int64)
    )


def test_os1_64_frame_of_reduced_metadata_is_its_whole_turn_indoors() -> None:
    """ouster-sdk's OS1-64 sample (firmware 2.0) comes with metadata of beam angles and mode only: read as
    64 rings x 1024 columns, 16,749 returns (ouster-sdk 1.0.1 decodes the same count), indoors."""
    g = read_real_scan(OS1_64, "OS1-64")
    assert g.range_m.shape == (64, 1024) and int(g.returned.sum()) == 16_749
    assert "frame 189, 1024 of 1024 columns" in g.note
    assert not is_outdoor(g)  # median range ~2.1 m: only its sensor statistics are compared


def test_ouster_pcap_without_metadata_is_one_clear_error(tmp_path: Path) -> None:
    shutil.copy(OS1_32, tmp_path / "alone.pcap")
    assert detect_format(tmp_path / "alone.pcap") == "ouster-pcap"
    with pytest.raises(RecordingError, match=r"no single Ouster metadata \.json beside it"):
        read_real_scan(tmp_path / "alone.pcap", "OS1-64")
    g = read_ouster_legacy_pcap(OS1_32, OS1_32.with_suffix(".json"))
    assert g.range_m.shape == (32, 1024)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("HDL-32E", r"must be PRESET=PATH"),
        ("NO-SUCH=x.pcd", r"--real 'NO-SUCH=x.pcd'"),
        ("HDL-32E=missing.pcd.bin", r"missing.pcd.bin: no such file"),
        ("HDL-32E=README.md", r"format not known from its name"),
    ],
)
def test_bad_real_options_name_what_is_wrong(tmp_path: Path, text: str, match: str) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("x")
    with pytest.raises(ConfigError, match=match):
        parse_real_option(text.replace("README.md", str(readme)))


def test_a_pcap_that_is_not_one_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"not a capture at all")
    with pytest.raises(RecordingError, match="neither a pcap nor a pcapng file"):
        detect_format(bad)


def _cli(*argv: str) -> tuple[int, str, str]:
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "rt_lidar.cli.main", *argv], capture_output=True, text=True, timeout=300
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_cli_refuses_a_bad_real_scan_with_one_line(tmp_path: Path) -> None:
    rc, _, err = _cli("validate", "--only", "realism", "--out", str(tmp_path), "--real", "HDL-32E=nope.pcd")
    assert rc == 2 and err.strip().count("\n") == 0 and "nope.pcd: no such file" in err
    rc, _, err = _cli(
        "validate", "--only", "rain_max_range", "--out", str(tmp_path), "--real", f"HDL-32E={NUSCENES}"
    )
    assert rc == 2 and "add it to --only" in err
    rc, _, err = _cli("validate", "--only", "realism", "--out", str(tmp_path), "--presets", "NOPE")
    assert rc == 2 and err.startswith("rt-lidar validate: error: --presets: NOPE")
    rc, _, err = _cli("validate", "--only", "realism", "--out", str(tmp_path), "--frames", "0")
    assert rc == 2 and "--frames: must be in [1, 20], got 0" in err
    assert not (tmp_path / "report.json").exists()  # refused before anything ran


def test_cli_sets_a_users_scan_beside_its_preset(tmp_path: Path) -> None:
    mine = tmp_path / "my_sweep.pcd.bin"
    shutil.copy(NUSCENES, mine)
    out = tmp_path / "out"
    rc, stdout, err = _cli(
        "validate",
        "--only",
        "realism",
        "--presets",
        "HDL-32E",
        "--frames",
        "1",
        "--out",
        str(out),
        "--real",
        f"HDL-32E={mine}",
    )
    assert rc == 0, err
    rep = json.loads((out / "report.json").read_text())["realism"]
    assert rep["presets"] == ["HDL-32E"] and rep["frames_per_preset"] == 1
    user = rep["real_scans"]["my_sweep.pcd.bin"]
    vendored = rep["real_scans"]["nuScenes HDL-32E"]
    assert user["origin"] == "user" and vendored["origin"] == "vendored"
    assert user["statistics"] == vendored["statistics"]  # the same bytes, the same statistics
    sim = rep["sim_horizon_m"][0]
    assert user["residual"]["horizon_m"] == pytest.approx(sim - user["statistics"]["ground_horizon_m"])
    assert "my_sweep.pcd.bin" in stdout and "my_sweep.pcd.bin" in (out / "realism.txt").read_text()
    assert "left out" in err  # the frames of presets not simulated: said, not silent
    assert (out / "realism.png").stat().st_size > 10_000


def test_dual_return_packets_keep_each_lasers_strongest_return() -> None:
    """The real VLP-32C firings re-packed as dual-return packets (each firing a block pair: a weaker,
    farther 'last' return, then the real one as the strongest) decode to the single-return firings."""
    from rt_lidar.sinks.velodyne import DATA_PACKET
    from rt_lidar.validation.real_velodyne import _data_payloads

    single = np.frombuffer(b"".join(_data_payloads(VLP32C)[0]), DATA_PACKET)
    blocks = single["blocks"].reshape(-1)[:600]
    last = blocks.copy()
    ch = last["channels"]
    ch["distance"] = np.where(ch["distance"] > 0, ch["distance"] + 500, 0)
    ch["intensity"] = ch["intensity"] // 2
    pairs = np.stack([last, blocks], 1).reshape(-1, 12)  # six firings a packet, last then strongest
    dual = np.zeros(pairs.shape[0], DATA_PACKET)
    dual["blocks"], dual["mode"], dual["product"] = pairs, 0x39, 0x28
    got = decode_velodyne_payloads([p.tobytes() for p in dual], 32)
    want = decode_velodyne_payloads([p.tobytes() for p in single[:50]], 32)
    assert got.return_mode == 0x39
    keep = got.intensity > 0  # a laser whose intensity is 0 has no stronger of its two to tell
    assert np.array_equal(got.distance[keep], want.distance[keep])
    assert np.array_equal(got.firing, want.firing) and np.array_equal(got.laser, want.laser)


def _sim_pcap(tmp_path: Path, preset: str, mode: str, second: bool) -> Path:
    """Two street scans of ``preset`` written as Velodyne packets by our own sink."""
    from rt_lidar.pipeline.builder import build_pipeline
    from rt_lidar.sinks.base import SinkContext
    from rt_lidar.sinks.velodyne import velodyne_pcap_sink

    built = build_pipeline(preset, "street", seed=0)
    try:
        scans = built.pipeline.scans(2)
    finally:
        built.pipeline.close()
    if second:  # every third point gains a farther, weaker second return
        from rt_lidar.pipeline.assembler import Scan

        out = []
        for s in scans:
            twin = s.points[::3].copy()
            for axis in ("x", "y", "z"):
                twin[axis] *= np.float32(1.25)
            twin["intensity"] = np.floor(twin["intensity"] * 0.5)
            twin["return_id"] = 1
            pts = np.concatenate([s.points, twin])
            pts = pts[np.lexsort((pts["return_id"], pts["ring"], pts["t"]))]
            out.append(Scan(s.index, s.start_ns, pts, s.fired, s.dropped, s.frames))
        scans = out
    path = tmp_path / f"{preset}-{mode}.pcap"
    sink = velodyne_pcap_sink(str(path), {"mode": mode})
    sink.open(SinkContext(load_preset(preset), scenario={"test": True}))
    for s in scans:
        sink.write(s)
    sink.close()
    return path


@pytest.mark.parametrize(("preset", "model"), [("VLP-16", "VLP16"), ("HDL-32E", "HDL32E")])
def test_vlp16_and_hdl32e_packets_decode_as_velodyne_decoder_does(
    tmp_path: Path, preset: str, model: str
) -> None:
    vd = pytest.importorskip("velodyne_decoder")
    from rt_lidar.validation.real_velodyne import _data_payloads

    p = load_preset(preset)
    path = _sim_pcap(tmp_path, preset, "strongest", False)
    ret = decode_velodyne_payloads(_data_payloads(path)[0], p.n_rings)
    res = 0.002
    elev_of_laser = np.zeros(p.n_rings)
    elev_of_laser[[int(b.laser_id if b.laser_id is not None else b.ring) for b in p.beams]] = p.elevations_deg
    rank = np.argsort(np.argsort(elev_of_laser, kind="stable"), kind="stable")
    got = ret.distance > 0
    ours = np.stack([rank[ret.laser[got]], np.round(ret.distance[got] * res * 1000), ret.intensity[got]], 1)
    cfg = vd.Config(max_range=1000.0, min_range=0.0)
    cfg.model = getattr(vd.Model, model)
    cfg.calibration = vd.Calibration.from_string(calibration_yaml(p))
    pts = np.concatenate([q for _, q in vd.read_pcap(str(path), cfg)])
    f = vd.PointField
    theirs = np.stack(
        [pts[:, f.ring], np.round(np.linalg.norm(pts[:, :3], axis=1) * 1000), pts[:, f.intensity]], 1
    )
    a = ours[np.lexsort(ours.T[::-1])].astype(np.int64)
    b = theirs[np.lexsort(theirs.T[::-1])].astype(np.int64)
    assert a.shape == b.shape and np.abs(a - b).max() <= 1  # the mm rounding of a 2 mm unit


def test_vlp16_dual_return_decodes_to_its_strongest_returns(tmp_path: Path) -> None:
    from rt_lidar.validation.real_velodyne import _data_payloads

    dual = decode_velodyne_payloads(_data_payloads(_sim_pcap(tmp_path, "VLP-16", "dual", True))[0], 16)
    single = decode_velodyne_payloads(
        _data_payloads(_sim_pcap(tmp_path, "VLP-16", "strongest", False))[0], 16
    )
    assert dual.return_mode == 0x39 and single.return_mode == 0x37
    n = min(dual.firing.size, single.firing.size)
    assert n > 0.9 * single.firing.size
    assert np.array_equal(dual.laser[:n], single.laser[:n])
    assert np.array_equal(dual.distance[:n], single.distance[:n])
    assert np.array_equal(dual.intensity[:n], single.intensity[:n])


@needs_peer("ouster")
@pytest.mark.parametrize("profile", ["LEGACY", "RNG19", "RNG15", "DUAL", "RNG15_DUAL"])
def test_ouster_packets_of_every_profile_read_as_ouster_sdk_reads_them(tmp_path: Path, profile: str) -> None:
    """Our own OS1-64 packets in each lidar profile, read back here and by ouster-sdk 1.0: the same range
    and signal (reflectivity where the profile has no signal) in every pixel."""
    from rt_lidar.pipeline.builder import build_pipeline
    from rt_lidar.sinks.base import SinkContext
    from rt_lidar.sinks.ouster import ouster_pcap_sink
    from rt_lidar.validation.real_ouster import read_ouster_pcap

    built = build_pipeline("OS1-64", "street", seed=0)
    try:
        scans = built.pipeline.scans(1)
    finally:
        built.pipeline.close()
    pcap = tmp_path / "os.pcap"
    sink = ouster_pcap_sink(str(pcap), {"profile": profile})
    sink.open(SinkContext(load_preset("OS1-64")))
    for s in scans:
        sink.write(s)
    sink.close()
    meta = tmp_path / "os.json"
    script = tmp_path / "read.py"
    script.write_text(
        "import sys, numpy as np\n"
        "from ouster.sdk import open_source\n"
        "from ouster.sdk.core import ChanField\n"
        "src = open_source(sys.argv[1], meta=[sys.argv[2]], index=False)\n"
        "s = max((fs[0] for fs in src), key=lambda s: int((s.field(ChanField.RANGE) > 0).sum()))\n"
        "f = ChanField.SIGNAL if ChanField.SIGNAL in s.fields else ChanField.REFLECTIVITY\n"
        "np.savez(sys.argv[3], r=s.field(ChanField.RANGE), sig=s.field(f))\n"
    )
    out = tmp_path / "sdk.npz"
    cmd = [str(peer_python("ouster")), str(script), str(pcap), str(meta), str(out)]
    subprocess.run(cmd, check=True, timeout=120, capture_output=True)
    sdk = np.load(out)
    g = read_ouster_pcap(pcap, meta)
    assert g.returned.sum() > 10_000
    assert np.array_equal(np.round(g.range_m * 1000).astype(np.int64), sdk["r"].astype(np.int64))
    assert np.array_equal(
        g.intensity.astype(np.int64), np.where(sdk["r"] > 0, sdk["sig"], 0).astype(np.int64)
    )
    assert g.units.startswith("Ouster reflectivity" if "RNG15" in profile else "Ouster signal")


def test_kitti_layout_bin_of_another_sensor_gets_rings_from_elevation(tmp_path: Path) -> None:
    """The nuScenes sweep as a KITTI-layout .bin (no ring field): rings from the HDL-32E's elevations,
    and the road statistics of the sweep read as its firing grid; shuffled and named HDL-64E, the
    file is not read ring by ring (its sweep jumps back at nearly every point)."""
    a = np.fromfile(NUSCENES, np.float32).reshape(-1, 5)
    path = tmp_path / "scan.bin"
    a[:, :4].tofile(path)
    assert detect_format(path) == "kitti-bin"
    native = realism_statistics(read_real_scan(NUSCENES, "HDL-32E"))
    s = realism_statistics(read_real_scan(path, "HDL-32E"))
    assert s["ground_falloff_20_30_over_0_10"] == pytest.approx(
        native["ground_falloff_20_30_over_0_10"], abs=0.1
    )
    assert s["ground_texture_share"] == pytest.approx(native["ground_texture_share"], abs=0.05)
    shuffled = tmp_path / "shuffled.bin"
    a[np.random.default_rng(0).permutation(len(a)), :4].tofile(shuffled)
    g = read_real_scan(shuffled, "HDL-64E")
    assert g.range_m.shape[0] <= 64  # the preset's rings, not one 'ring' per jump of the sweep
