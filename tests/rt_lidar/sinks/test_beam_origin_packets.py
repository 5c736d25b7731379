"""Beams that start off the sensor axis: our points are where the vendors' decoders place them.

Presets made from vendor files with beam origins (Ouster's ``beam_to_lidar_transform``, Velodyne's
vertical and horizontal offsets) cast each ray from its beam's origin; their packets, decoded by the
vendor's decoder with the vendor's file (origins included), give back our points within 1 cm."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import velodyne_pcap_of
from test_ouster_profiles import PEER, _decode, _sensor_frame
from test_velodyne import EPOCH_S, _encodable

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.points import empty_points
from rt_lidar.sensor.beam_origins import ranges_along_beams
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.ouster import OusterPacketizer, ouster_pcap_sink
from rt_lidar.sinks.ouster_meta import read_metadata

vd = pytest.importorskip("velodyne_decoder")

DATA = Path(__file__).resolve().parents[2] / "data" / "vendor"


def _preset(ref: str) -> SensorPreset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the model a file does not name is guessed (and said)
        return load_preset(ref)


def _with_offsets(src: Path, out: Path) -> Path:
    """A copy of velodyne_decoder calibration ``src`` whose lasers have vertical and horizontal offsets
    of a few centimetres (both signs, as real HDL units have), and distance corrections."""
    d = yaml.safe_load(src.read_text())
    for las in d["lasers"]:
        i = int(las["laser_id"])
        las["vert_offset_correction"] = 0.02 + 0.003 * (i % 7) * (-1) ** i
        las["horiz_offset_correction"] = 0.026 * (-1) ** (i // 2)
        las["dist_correction"] = 0.01 * (i % 5)
    out.write_text(yaml.safe_dump(d))
    return out


def _velodyne_decode(pcap: Path, cal: Path, model: str) -> np.ndarray:
    cfg = vd.Config(max_range=1000.0)
    cfg.model = getattr(vd.Model, model)
    cfg.calibration = vd.Calibration.read(str(cal))
    parts = []
    for stamp, pts in vd.read_pcap(str(pcap), cfg):
        times = stamp.device + pts[:, vd.PointField.time].astype(np.float64)
        parts.append(np.column_stack([pts.astype(np.float64), times]))
    return np.concatenate(parts)


@pytest.mark.parametrize(("src", "model"), [("VLP-32A.yml", "VLP32C"), ("32db.yaml", "HDL32E")])
@pytest.mark.parametrize("mode", ["strongest", "dual"])
def test_velodyne_offsets_place_points_as_velodyne_decoder_does(tmp_path, pipeline_scans, src, model, mode):
    cal = _with_offsets(DATA / "velodyne" / src, tmp_path / "offsets.yaml")
    preset = _preset(str(cal) + ("#model=HDL-32E" if model == "HDL32E" else "#model=VLP-32A"))
    origins = preset.beam_origins_m
    assert origins is not None and np.linalg.norm(origins, axis=1).min() > 0.02
    pcap = tmp_path / "v.pcap"
    scans = velodyne_pcap_of(pcap, preset, list(pipeline_scans(preset, 2)), mode)
    dec = _velodyne_decode(pcap, cal, model)

    ours = np.concatenate([s.points for s in scans])
    t_abs = (
        ours["t"] * 1e-9
        + EPOCH_S
        + np.concatenate([np.full(s.points.size, s.start_ns * 1e-9) for s in scans])
    )
    assert dec.shape[0] == ours.size  # dual: the far twins too (on their beams: conftest)
    f = vd.PointField
    xyz = np.column_stack([ours[a].astype(np.float64) for a in "xyz"])
    o = np.lexsort((np.linalg.norm(xyz, axis=1), t_abs, ours["ring"]))
    d = np.lexsort((np.linalg.norm(dec[:, :3], axis=1), dec[:, 8], dec[:, f.ring]))
    np.testing.assert_array_equal(dec[d, f.ring], ours["ring"][o])
    xyz = xyz[o]
    # out from the axis and up: within the packets' 2-4 mm; around it: their 0.01 deg azimuth
    assert _off_azimuth_gap(dec[d, :3], xyz).max() < 0.01
    az = np.degrees(np.arctan2(xyz[:, 1], xyz[:, 0]) - np.arctan2(dec[d, 1], dec[d, 0]))
    assert np.abs((az + 180.0) % 360.0 - 180.0).max() <= 0.015  # the packets' 0.01 deg, interpolated
    # the offsets matter: the same packets decoded without them put points centimetres away
    plain = yaml.safe_load(cal.read_text())
    for las in plain["lasers"]:
        las["vert_offset_correction"] = las["horiz_offset_correction"] = 0.0
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(plain))
    dec0 = _velodyne_decode(pcap, tmp_path / "plain.yaml", model)
    d0 = np.lexsort((np.linalg.norm(dec0[:, :3], axis=1), dec0[:, 8], dec0[:, f.ring]))
    assert np.percentile(_off_azimuth_gap(dec0[d0, :3], xyz), 90) > 0.015


def _off_azimuth_gap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance between points ``a`` and ``b`` (N, 3) out from the axis and up (their azimuths aside)."""
    return np.hypot(np.hypot(a[:, 0], a[:, 1]) - np.hypot(b[:, 0], b[:, 1]), a[:, 2] - b[:, 2])


def test_velodyne_ranges_along_beams_invert_the_origins(pipeline_scans, tmp_path):
    """The range the packet writer recovers from a point is the one the pipeline cast along the beam."""
    cal = _with_offsets(DATA / "velodyne" / "VLP-32A.yml", tmp_path / "offsets.yaml")
    preset = _preset(str(cal))
    pts = pipeline_scans(preset, 1)[0].points
    s = ranges_along_beams(preset, pts)
    from rt_lidar.sensor.scan_pattern import beam_origins

    az_head = np.zeros(pts.size)  # any column: the recovered range does not depend on it
    o = beam_origins(preset, pts["ring"], az_head + preset.azimuth_offsets_deg[pts["ring"]])
    assert o is not None
    plain = np.sqrt(pts["x"].astype(np.float64) ** 2 + pts["y"] ** 2 + pts["z"] ** 2)
    assert np.abs(s - plain).max() > 0.005  # the origins change the range ...
    assert np.abs(s - plain).max() < 0.1  # ... by about their size


@pytest.mark.skipif(not PEER.exists(), reason="ouster-sdk peer venv absent: run tools/setup_ouster_peer.sh")
@pytest.mark.parametrize(
    "name",
    [
        "OS-0-32-U1_v2.2.0_1024x10.json",
        "OS-2-128-U1_v2.3.0_1024x10.json",
        "OS-1-64-AH_v2.5.2_same_ports_nonlegacy.2.json",
        "OS-0-128_v2.3.0_512x10_windowed_frame1_0.json",
    ],
)
@pytest.mark.parametrize("with_file", [True, False], ids=["metadata=file", "metadata written"])
def test_ouster_sdk_places_our_pixels_at_our_points_with_beam_origins(
    tmp_path, pipeline_scans, name, with_file
):
    """ouster-sdk with the vendor's file (origins and all), or with the metadata the sink writes for
    the preset when given none (it carries the preset's origins)."""
    given = DATA / "ouster" / name
    preset = _preset(str(given))
    assert preset.beam_origins_m is not None  # the file's beam origins are the preset's
    scan = pipeline_scans(preset, 1)[0]
    pcap = tmp_path / "os.pcap"
    sink = ouster_pcap_sink(str(pcap), {"metadata": str(given)} if with_file else {})
    sink.open(SinkContext(preset))
    sink.write(scan)
    sink.close()
    meta_file = given if with_file else tmp_path / "os.json"
    dec = _decode(tmp_path, pcap, meta_file, meta_file)
    meta = read_metadata(tmp_path / "os.json")
    pz = OusterPacketizer(preset, meta)
    quantum = 8 if "RNG15" in str(dec["given"][0]) else 1
    # our point of each pixel: the strongest of its beam and column (the packets carry that one)
    pts = scan.points
    o2 = np.einsum("ij,ij->i", preset.beam_origins_m, preset.beam_origins_m)
    mm = np.round((ranges_along_beams(preset, pts) + np.sqrt(o2)[pts["ring"]]) * 1000).astype(np.int64)
    if quantum > 1:
        mm = ((mm + 4) >> 3) << 3
    ours: dict[tuple[int, int], list[np.ndarray]] = {}
    xyz_ours = np.column_stack([pts[a].astype(np.float64) for a in "xyz"])
    for ring, r, p in zip(pts["ring"].tolist(), mm.tolist(), xyz_ours, strict=True):
        ours.setdefault((ring, r), []).append(p)
    rows, cols = np.nonzero(dec["RANGE"][0])
    got = _sensor_frame(dec["xyz"][0][rows, cols], meta)
    gap, az = [], []
    for i, key in enumerate(zip(rows.tolist(), dec["RANGE"][0][rows, cols].tolist(), strict=True)):
        if key in ours:
            cand = np.array(ours[key])
            j = int(np.argmin(np.linalg.norm(cand - got[i], axis=1)))
            gap.append(float(np.linalg.norm(cand[j] - got[i])))
            a = np.degrees(np.arctan2(got[i, 1], got[i, 0]) - np.arctan2(cand[j, 1], cand[j, 0]))
            az.append(abs((a + 180.0) % 360.0 - 180.0))
    assert len(gap) > 0.95 * rows.size > 0
    limit = 0.0006 if quantum == 1 else 0.0045  # the range's mm (or 8 mm) rounding
    assert max(gap) < limit, max(gap)
    assert max(az) < 0.01, max(az)
    assert pz.h == preset.n_rings


def _matched(scans, dec: np.ndarray, ref: str) -> tuple[np.ndarray, np.ndarray]:
    """Our points' xyz and the decoded points', matched by ring, firing time and range (dual: both
    returns, the test's far twins on their beams: conftest.with_second_returns)."""
    fits = [_encodable(ref, s) for s in scans]  # a far twin beyond the 16-bit field is not sent
    ours = np.concatenate(fits)
    t_abs = (
        ours["t"] * 1e-9
        + EPOCH_S
        + np.concatenate([np.full(p.size, s.start_ns * 1e-9) for p, s in zip(fits, scans, strict=True)])
    )
    assert dec.shape[0] == ours.size
    f = vd.PointField
    xyz = np.column_stack([ours[a].astype(np.float64) for a in "xyz"])
    o = np.lexsort((np.linalg.norm(xyz, axis=1), t_abs, ours["ring"]))
    d = np.lexsort((np.linalg.norm(dec[:, :3], axis=1), dec[:, 8], dec[:, f.ring]))
    np.testing.assert_array_equal(dec[d, f.ring], ours["ring"][o])
    return xyz[o], dec[d, :3]


@pytest.mark.parametrize("src", ["64e_s2.1-sztaki.yaml", "issue_84_float_intensities.yaml"])
@pytest.mark.parametrize("mode", ["strongest", "dual"])
def test_hdl64e_offsets_and_two_point_corrections_decode_to_our_points(tmp_path, pipeline_scans, src, mode):
    """A real HDL-64E's file (offsets of 2.6 cm to 21 cm, two-point distance corrections): our points
    are where velodyne-decoder puts the packets' returns with that file (the two-point correction moves
    a point off its beam's line by up to centimetres within 25 m: our point moves with it)."""
    cal = DATA / "velodyne" / src
    preset = _preset(str(cal))
    assert preset.packet_format == "velodyne-hdl64" and preset.beam_origins_m is not None
    pcap = tmp_path / "v.pcap"
    scans = velodyne_pcap_of(pcap, preset, list(pipeline_scans(preset, 2)), mode)
    ours, dec = _matched(scans, _velodyne_decode(pcap, cal, "HDL64E_S2"), str(cal))
    assert _off_azimuth_gap(dec, ours).max() < 0.002  # the packets' 2 mm
    az = np.degrees(np.arctan2(ours[:, 1], ours[:, 0]) - np.arctan2(dec[:, 1], dec[:, 0]))
    az = np.abs((az + 180.0) % 360.0 - 180.0)
    # the packets' 0.01-deg azimuth step, and nearer than 10 m their 2 mm distance step across the beam
    # (with offsets of centimetres, the azimuth of a near point's position moves with its range)
    far = np.linalg.norm(ours[:, :2], axis=1) > 10.0
    # every point within the step and its rounding (a point within 2 mm of the two-point calibration's
    # far point lands on the side its packet's distance puts it: beam_origins.two_point_shift)
    assert az[far].max() <= 0.0125
    assert np.all(np.radians(az[~far]) * np.linalg.norm(ours[~far, :2], axis=1) <= 0.003)
    # the two-point correction matters: decoded without it (dist_correction alone), points within
    # 25 m land centimetres from ours
    plain = yaml.safe_load(cal.read_text())
    for las in plain["lasers"]:
        las["dist_correction_x"] = las["dist_correction_y"] = 0.0
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(plain))
    _, dec0 = _matched(scans, _velodyne_decode(pcap, tmp_path / "plain.yaml", "HDL64E_S2"), str(cal))
    near = np.linalg.norm(ours, axis=1) < 20.0
    assert np.percentile(_off_azimuth_gap(dec0[near], ours[near]), 90) > 0.01


@pytest.mark.parametrize("ref", [str(DATA / "velodyne" / "64e_s2.1-sztaki.yaml"), "HDL-64E"])
def test_hdl64e_stream_carries_the_files_offsets_and_two_point_corrections(tmp_path, pipeline_scans, ref):
    """The status bytes carry the file's calibration (to the mm and 0.01 deg): velodyne-decoder reads
    it from our packets alone and places the points within a few mm of ours (a real S2.1 unit's file,
    and the shipped preset)."""
    preset = _preset(ref)
    scans = list(pipeline_scans(preset, 2))
    period = scan_period_ns(preset)
    pad = [Scan(k, k * period, empty_points(), 0, 0) for k in range(2, 13)]  # a whole status cycle
    pcap = tmp_path / "v.pcap"
    velodyne_pcap_of(pcap, preset, scans + pad, "strongest")
    model, calib = vd.hdl64e.read_calibration_from_pcap(str(pcap))
    assert model == vd.Model.HDL64E_S2
    lasers = {las["laser_id"]: las for las in yaml.safe_load(calib.to_string())["lasers"]}
    for b in preset.beams:
        got = lasers[b.laser_id]
        for key, want in (
            ("vert_offset_correction", b.vert_offset_correction_m),
            ("horiz_offset_correction", b.horiz_offset_correction_m),
            ("dist_correction_x", b.dist_correction_x_m),
            ("dist_correction_y", b.dist_correction_y_m),
        ):
            assert got.get(key, 0.0) == pytest.approx(want or 0.0, abs=0.0005 + 1e-6)
    cfg = vd.Config(max_range=1000.0)
    cfg.model, cfg.calibration = model, calib
    parts = []
    for stamp, pts in vd.read_pcap(str(pcap), cfg):
        times = stamp.device + pts[:, vd.PointField.time].astype(np.float64)  # float32 + a float: float32
        parts.append(np.column_stack([pts.astype(np.float64), times]))
    ours, dec = _matched(scans, np.concatenate(parts), ref)
    # the stream's whole hundredths of a degree and millimetres: a few mm at the street's ranges
    assert np.percentile(_off_azimuth_gap(dec, ours), 99) < 0.01


@pytest.mark.parametrize("src", ["64e_s2.1-sztaki.yaml", "64e_s3-xiesc.yaml"])
def test_hdl64e_users_file_dual_returns_decode_on_their_beams(tmp_path, pipeline_scans, src):
    """A user's HDL-64E file (beams from 10-21 cm up and 2.6 cm sideways) in dual return mode on the
    street: the simulator's own second returns (edges, glass), written as packets and decoded by
    velodyne-decoder with that file, come back where the simulator put them, both returns of every
    pulse, the farther one as the last return."""
    cal = DATA / "velodyne" / src
    preset = _preset(str(cal))
    assert preset.packet_format == "velodyne-hdl64" and preset.beam_origins_m is not None
    scans = list(pipeline_scans(preset, 2, "dual"))
    pcap = tmp_path / "v.pcap"
    velodyne_pcap_of(pcap, preset, scans, "dual", fake_second_returns=False)  # the simulator's own
    dec = _velodyne_decode(pcap, cal, "HDL64E_S2")
    ours = np.concatenate([s.points for s in scans])
    second = ours["return_id"] == 1
    assert second.sum() > 500  # the street's own second returns, not faked ones
    t_abs = (
        ours["t"] * 1e-9
        + EPOCH_S
        + np.concatenate([np.full(s.points.size, s.start_ns * 1e-9) for s in scans])
    )
    assert dec.shape[0] == ours.size  # a pulse's one return fills both blocks: the decoder merges them
    f = vd.PointField
    xyz = np.column_stack([ours[a].astype(np.float64) for a in "xyz"])
    o = np.lexsort((np.linalg.norm(xyz, axis=1), t_abs, ours["ring"]))
    d = np.lexsort((np.linalg.norm(dec[:, :3], axis=1), dec[:, 8], dec[:, f.ring]))
    np.testing.assert_array_equal(dec[d, f.ring], ours["ring"][o])
    assert np.abs(dec[d, 8] - t_abs[o]).max() < 2e-6  # the same firing (stamps floored to 1 us)
    # the farther echo is the last return (type 2), its pulse's other one the strongest (type 1)
    start = np.concatenate([np.full(s.points.size, s.start_ns, np.int64) for s in scans])
    pulse = ((start + ours["t"].astype(np.int64)) * preset.n_rings + ours["ring"])[o]
    rtype, rid = dec[d, f.return_type], ours["return_id"][o]
    assert np.all(rtype[rid == 1] == 2)
    assert np.all(rtype[(rid == 0) & np.isin(pulse, pulse[rid == 1])] == 1)
    assert np.all(rtype[~np.isin(pulse, pulse[rid == 1])] == 3)  # one echo: both blocks, merged
    ours_xyz, dec_xyz = xyz[o], dec[d, :3]
    for which in (rid == 0, rid == 1):  # both returns: the range along the beam to the packets' 2 mm
        assert _off_azimuth_gap(dec_xyz[which], ours_xyz[which]).max() < 0.0015  # half a step, float32
        az = np.degrees(
            np.arctan2(ours_xyz[which, 1], ours_xyz[which, 0])
            - np.arctan2(dec_xyz[which, 1], dec_xyz[which, 0])
        )
        az = np.abs((az + 180.0) % 360.0 - 180.0)
        far = np.linalg.norm(ours_xyz[which, :2], axis=1) > 10.0
        assert az[far].max() <= 0.0125  # the packets' 0.01 deg block azimuth, interpolated
        near_across = np.radians(az[~far]) * np.linalg.norm(ours_xyz[which][~far, :2], axis=1)
        assert np.all(near_across <= 0.003)  # near: their 2 mm step across the beam
