"""Ouster packets follow the metadata file they are given: ouster-sdk 1.0 (its own venv,
tools/setup_ouster_peer.sh) reads our pcap with that file and decodes what we wrote.

The files under data/ouster/ are shaped as real sensors write them: firmware 2.x's flat layout
(``data_format``, top-level ``prod_sn``), firmware 3.x's nested one (``config_params``,
``sensor_info``, ...), with the profiles, packet sizes and column windows those firmwares offer.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import with_second_returns
from peers import needs_peer, peer_python

from rt_lidar.errors import FieldError
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.ouster import OusterPacketizer, metadata_for, ouster_pcap_sink
from rt_lidar.sinks.ouster_meta import read_metadata
from rt_lidar.sinks.pcap import read_pcap_udp

ROOT = Path(__file__).resolve().parents[3]
PEER = peer_python("ouster")
DATA = Path(__file__).resolve().parent / "data" / "ouster"

pytestmark = needs_peer("ouster")

READER = """
import json, sys, numpy as np
from ouster.sdk import core, open_source
pcap, meta, given, out = sys.argv[1:5]
res = {}
g = core.SensorInfo(open(given).read())  # ouster-sdk's own reading of the file we were given
res["given"] = np.array([str(g.format.udp_profile_lidar), g.format.columns_per_packet,
                         g.format.column_window[0], g.format.column_window[1], g.init_id, g.sn], object)
frames = [fs[0] for fs in open_source(pcap, meta=[meta], index=False)]
res["n"] = np.array(len(frames))
for name in ("RANGE", "REFLECTIVITY", "SIGNAL", "RANGE2", "REFLECTIVITY2", "SIGNAL2", "NEAR_IR"):
    if frames and frames[0].has_field(name):
        res[name] = np.stack([f.field(name).astype(np.int64) for f in frames])
if frames:
    info = frames[0].sensor_info
    lut = core.XYZLut(info, use_extrinsics=False)
    res["xyz"] = np.stack([lut(f.field("RANGE")) for f in frames])
    res["destaggered"] = np.stack([core.destagger(info, f.field("RANGE")) for f in frames])
    res["status"] = np.stack([f.status for f in frames])
    res["ids"] = np.array([info.init_id, info.sn])
np.savez(out, **res)
"""


def _decode(tmp_path: Path, pcap: Path, meta: Path, given: Path) -> dict[str, np.ndarray]:
    (tmp_path / "reader.py").write_text(READER)
    out = tmp_path / "decoded.npz"
    args = [str(PEER), str(tmp_path / "reader.py"), str(pcap), str(meta), str(given), str(out)]
    run = subprocess.run(args, timeout=120, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    with np.load(out, allow_pickle=True) as z:
        return dict(z)


def _write(tmp_path: Path, preset_name: str, scans, options: dict[str, str]) -> Path:
    path = tmp_path / "os.pcap"
    sink = ouster_pcap_sink(str(path), options)
    sink.open(SinkContext(load_preset(preset_name)))
    for s in scans:
        sink.write(s)
    sink.close()
    return path


def _sensor_frame(xyz: np.ndarray, meta: dict) -> np.ndarray:
    """ouster-sdk's sensor frame (the lidar frame turned half a turn, its origin 36.18 mm above the
    base) -> ours, whose ranges start at the lidar origin."""
    return xyz - np.array([0.0, 0.0, meta["lidar_intrinsics"]["lidar_to_sensor_transform"][11] / 1000.0])


CASES = {
    # file: (preset, firmware layout's profile, range quantum mm)
    "os1-64_fw2.0.0_legacy_flat.json": ("OS1-64", "LEGACY", 1),
    "os1-64_fw2.3.1_rng19_flat.json": ("OS1-64", "RNG19_RFL8_SIG16_NIR16", 1),
    "os1-64_fw2.5.0_rng15_flat.json": ("OS1-64", "RNG15_RFL8_NIR8", 8),
    "os1-64_fw3.0.1_dual_nested.json": ("OS1-64", "RNG19_RFL8_SIG16_NIR16_DUAL", 1),
    "os1-64_fw3.1.0_rng19_cpp32_window_nested.json": ("OS1-64", "RNG19_RFL8_SIG16_NIR16", 1),
    "os-2-128_fw2.3.0_rng19_flat.json": ("OS1-128", "RNG19_RFL8_SIG16_NIR16", 1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_ouster_sdk_reads_what_the_metadata_says(tmp_path, pipeline_scans, name):
    preset_name, profile, quantum = CASES[name]
    given = DATA / name
    scans = list(pipeline_scans(preset_name, 2))
    if profile.endswith("_DUAL"):
        scans = [with_second_returns(s) for s in scans]
    pcap = _write(tmp_path, preset_name, scans, {"metadata": str(given)})
    meta = json.loads((tmp_path / "os.json").read_text())
    dec = _decode(tmp_path, pcap, tmp_path / "os.json", given)

    # ouster-sdk's reading of the given file is what our packets follow
    g_profile, g_cpp, w0, w1, g_init, g_sn = dec["given"]
    fmt = meta["lidar_data_format"]
    assert (g_profile, g_cpp, [w0, w1]) == (profile, fmt["columns_per_packet"], fmt["column_window"])
    if profile != "LEGACY":
        assert (g_init, g_sn) == tuple(int(v) for v in dec["ids"])
    # the packets: size, count, header ids
    recs = [r for r in read_pcap_udp(pcap) if r.dst_port == 7502]
    pz = OusterPacketizer(load_preset(preset_name), meta)
    assert {len(r.payload) for r in recs} == {pz.format.packet_bytes}
    assert len(recs) == 2 * len(pz.packets)
    imu = [r for r in read_pcap_udp(pcap) if r.dst_port == 7503]  # 100 Hz, 48 bytes (LEGACY IMU)
    assert len(imu) == 20 and {len(r.payload) for r in imu} == {48}
    assert np.all(np.diff([r.stamp_ns for r in imu]) == 10_000_000)
    if profile != "LEGACY":
        head = recs[0].payload
        assert int.from_bytes(head[4:7], "little") == g_init and int.from_bytes(head[7:12], "little") == g_sn

    # every pixel decodes to what we wrote
    assert int(dec["n"]) == len(scans)
    inside = np.zeros(pz.cols, bool)
    inside[pz.format.window_columns()] = True
    for k, scan in enumerate(scans):
        img = pz.image(scan)
        want_range = img["range"] // quantum * quantum if quantum > 1 else img["range"]
        if quantum > 1:  # 8 mm units, rounded to the nearest
            want_range = np.minimum((img["range"] + 4) >> 3, (1 << 15) - 1) << 3
        np.testing.assert_array_equal(dec["RANGE"][k][:, inside], want_range[:, inside])
        assert not dec["RANGE"][k][:, ~inside].any()
        # firmware 2.0's LEGACY reflectivity is 16 bits of signal x range^2 (issue 40); ouster-sdk 1.0 reads
        # its low byte, as it does from the real firmware 2.0 frame of ../shared/reference/real
        want_refl = img["reflectivity"] & 0xFF if pz.signal_r2 else img["reflectivity"]
        np.testing.assert_array_equal(dec["REFLECTIVITY"][k][:, inside], want_refl[:, inside])
        if "SIGNAL" in dec:
            np.testing.assert_array_equal(dec["SIGNAL"][k][:, inside], img["signal"][:, inside])
        if profile.endswith("_DUAL"):
            for f in ("RANGE", "REFLECTIVITY", "SIGNAL"):
                np.testing.assert_array_equal(dec[f + "2"][k], img[f.lower() + "2"])
            assert (dec["RANGE2"][k] > 0).sum() > 0.2 * (dec["RANGE"][k] > 0).sum()
        assert np.all(dec["status"][k][inside] & 1) and not np.any(dec["status"][k][~inside] & 1)

    # ouster-sdk's XYZ (from the file's beam angles) points where we cast: half a column (0.18 deg) at most
    for k, scan in enumerate(scans):
        err = _azimuth_error(dec, meta, scan, k, quantum)
        assert np.percentile(err, 99.9) < 0.18 and np.median(err) < 0.15, (np.median(err), np.max(err))


def _azimuth_error(dec: dict[str, np.ndarray], meta: dict, scan, k: int = 0, quantum: int = 1) -> np.ndarray:
    """Per decoded pixel: |azimuth| difference (deg) between ouster-sdk's XYZ of the pixel and our
    point of the same beam and the same range (to the mm; the nearest in azimuth if several)."""
    pts = scan.points
    rng = np.sqrt(pts["x"].astype(np.float64) ** 2 + pts["y"] ** 2 + pts["z"] ** 2)
    mm = np.round(rng * 1000).astype(int)
    if quantum > 1:
        mm = ((mm + 4) >> 3) << 3
    ours: dict[tuple[int, int], list[float]] = {}
    for ring, r, a in zip(
        pts["ring"].tolist(), mm.tolist(), np.arctan2(pts["y"], pts["x"]).tolist(), strict=True
    ):
        ours.setdefault((ring, r), []).append(a)
    rows, cols = np.nonzero(dec["RANGE"][k])
    xyz = _sensor_frame(dec["xyz"][k][rows, cols], meta)
    got = np.arctan2(xyz[:, 1], xyz[:, 0])
    err = np.full(rows.size, np.inf)
    for i, key in enumerate(zip(rows.tolist(), dec["RANGE"][k][rows, cols].tolist(), strict=True)):
        if key in ours:
            d = np.degrees(got[i] - np.array(ours[key]))
            err[i] = np.abs((d + 180.0) % 360.0 - 180.0).min()
    return err


def test_beam_azimuths_of_the_file_move_points_to_their_columns(tmp_path, pipeline_scans):
    """The fw 3.0.1 file's beam azimuths lie ~1 deg from the preset's: each beam's returns move by
    the columns between them, so ouster-sdk's XYZ agrees; packets that ignored them would be ~1 deg off."""
    preset = load_preset("OS1-64")
    name = DATA / "os1-64_fw3.0.1_dual_nested.json"
    pz = OusterPacketizer(preset, metadata_for(preset, read_metadata(name)))
    assert np.abs(pz.column_shift).max() >= 3
    assert not OusterPacketizer(preset, metadata_for(preset)).column_shift.any()
    scan = pipeline_scans("OS1-64", 1)[0]
    pcap = _write(tmp_path, "OS1-64", [scan], {"metadata": str(name)})
    meta = json.loads((tmp_path / "os.json").read_text())
    err = _azimuth_error(_decode(tmp_path, pcap, tmp_path / "os.json", name), meta, scan)
    # the same sensor, but packets written as if its beams pointed where the preset's do
    unshifted = dict(meta, beam_intrinsics=dict(meta["beam_intrinsics"]))
    unshifted["beam_intrinsics"]["beam_azimuth_angles"] = [-float(a) for a in preset.azimuth_offsets_deg]
    (tmp_path / "unshifted.json").write_text(json.dumps(unshifted))
    (tmp_path / "file.json").write_text(json.dumps(meta))  # os.json is rewritten by the next run
    with pytest.warns(UserWarning, match="pixel_shift_by_row disagrees with the beam azimuths"):
        pcap = _write(tmp_path, "OS1-64", [scan], {"metadata": str(tmp_path / "unshifted.json")})
    wrong = _azimuth_error(_decode(tmp_path, pcap, tmp_path / "file.json", name), meta, scan)
    assert np.median(err) < 0.15 and np.percentile(err, 99.9) < 0.18
    # off by the 0.1-1.1 deg between the file's beam azimuths and the preset's (0.5 deg median)
    assert np.median(wrong) > 0.4 and np.percentile(wrong, 99) > 1.0


def test_destaggering_with_the_written_shifts_lines_up_columns(tmp_path, pipeline_scans):
    """ouster-sdk destaggers with our metadata's ``pixel_shift_by_row``: in each destaggered column
    every beam looks the same way (within a column), where the staggered rows spread ~6 deg."""
    scan = pipeline_scans("OS1-64", 1)[0]
    pcap = _write(tmp_path, "OS1-64", [scan], {"profile": "RNG19"})
    meta = tmp_path / "os.json"
    dec = _decode(tmp_path, pcap, meta, meta)
    info = json.loads(meta.read_text())
    shifts = np.array(info["lidar_data_format"]["pixel_shift_by_row"])
    xyz = _sensor_frame(dec["xyz"][0], info)
    rng = dec["RANGE"][0]
    # a pixel with no return decodes to (0, 0, 0): no direction, so it takes no part in the spread
    az = np.where(rng > 0, np.degrees(np.arctan2(xyz[..., 1], xyz[..., 0])), np.nan)
    dest_az = np.stack([np.roll(az[r], shifts[r]) for r in range(az.shape[0])])
    np.testing.assert_array_equal(
        np.stack([np.roll(rng[r], shifts[r]) for r in range(64)]), dec["destaggered"][0]
    )

    def spread(a: np.ndarray) -> float:
        """Median over the columns with returns in at least half the rows of their azimuths' spread."""
        cols = np.count_nonzero(~np.isnan(a), axis=0) >= a.shape[0] // 2
        a = a[:, cols]
        ref = a[np.argmax(~np.isnan(a), axis=0), np.arange(a.shape[1])]  # each column's first return
        d = (a - ref + 180.0) % 360.0 - 180.0
        return float(np.median(np.nanmax(d, axis=0) - np.nanmin(d, axis=0)))

    assert spread(dest_az) < 0.36  # one column at 1024 a turn
    assert spread(az) > 5.0


def test_packet_ids_must_match_the_metadata(tmp_path, pipeline_scans):
    """A file whose initialization_id differs from the packets': ouster-sdk drops every packet (the
    header ids are checked), so the ids we write are the file's."""
    given = DATA / "os1-64_fw2.3.1_rng19_flat.json"
    pcap = _write(tmp_path, "OS1-64", list(pipeline_scans("OS1-64", 1)), {"metadata": str(given)})
    other = json.loads((tmp_path / "os.json").read_text())
    other["sensor_info"]["initialization_id"] += 1
    (tmp_path / "other.json").write_text(json.dumps(other))
    dec = _decode(tmp_path, pcap, tmp_path / "other.json", given)
    assert int(dec["n"]) == 0 or not dec["RANGE"].any()
    dec = _decode(tmp_path, pcap, tmp_path / "os.json", given)
    assert int(dec["n"]) == 1 and dec["RANGE"].any()


def test_preset_and_metadata_mismatch_is_a_field_error(tmp_path):
    os64 = load_preset("OS1-64")
    big = DATA / "os-2-128_fw2.3.0_rng19_flat.json"
    with pytest.raises(
        FieldError, match=r"os-2-128_fw2.3.0_rng19_flat.json: field 'beam_altitude_angles': 128"
    ):
        ouster_pcap_sink(str(tmp_path / "a.pcap"), {"metadata": str(big)}).open(SinkContext(os64))
    nested = read_metadata(DATA / "os1-64_fw3.0.1_dual_nested.json")
    nested["config_params"]["lidar_mode"] = "2048x10"
    (tmp_path / "m.json").write_text(json.dumps(nested))
    with pytest.raises(FieldError, match=r"m.json: field 'config_params.lidar_mode': 2048x10: preset OS1-64"):
        ouster_pcap_sink(str(tmp_path / "b.pcap"), {"metadata": str(tmp_path / "m.json")}).open(
            SinkContext(os64)
        )
    nested["config_params"]["lidar_mode"] = "1024x10"
    os2 = [a / 2.0 for a in nested["beam_intrinsics"]["beam_altitude_angles"]]  # an OS-2's narrow fan
    with pytest.raises(
        FieldError,
        match=r"beam_altitude_angles': beam 63 looks up -8\.594 deg, preset OS1-64's -17\.188",
    ):
        metadata_for(
            os64, dict(nested, beam_intrinsics={**nested["beam_intrinsics"], "beam_altitude_angles": os2})
        )
    nested["config_params"]["lidar_mode"] = "1024x20"
    with pytest.raises(FieldError, match="lidar_mode': 1024x20"):
        metadata_for(os64, nested)
    nested["config_params"]["lidar_mode"] = "1024x10"
    nested["lidar_data_format"]["udp_profile_lidar"] = "RNG19_RFL8_SIG16_NIR16_RGB16"
    with pytest.raises(
        FieldError, match=r"lidar_data_format\.udp_profile_lidar': 'RNG19_RFL8_SIG16_NIR16_RGB16"
    ):
        metadata_for(os64, nested)
    nested["lidar_data_format"]["udp_profile_lidar"] = "FUSA_RNG15_RFL8_NIR8_DUAL"
    nested["lidar_data_format"]["header_type"] = "STANDARD"
    with pytest.raises(FieldError, match=r"header_type': STANDARD: profile FUSA_RNG15_RFL8_NIR8_DUAL"):
        metadata_for(os64, nested)
    del nested["lidar_data_format"]["header_type"]
    nested["lidar_data_format"]["udp_profile_lidar"] = "RNG19_RFL8_SIG16_NIR16_DUAL"
    with pytest.raises(FieldError, match="asked for profile=RNG19"):
        metadata_for(os64, nested, profile="RNG19")
    nested["lidar_data_format"]["columns_per_packet"] = 64
    with pytest.raises(FieldError, match="columns_per_packet': 64: a RNG19_RFL8_SIG16_NIR16_DUAL packet"):
        metadata_for(os64, nested)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(FieldError, match=r"bad\.json"):
        ouster_pcap_sink(str(tmp_path / "c.pcap"), {"metadata": str(tmp_path / "bad.json")})


def test_ouster_udp_sends_the_pcap_bytes(tmp_path, pipeline_scans):
    """``ouster-udp`` with a metadata file: the same lidar and IMU datagrams as ``ouster-pcap``."""
    import socket

    from rt_lidar.sinks.base import make_sink

    given = DATA / "os1-64_fw3.1.0_rng19_cpp32_window_nested.json"
    scan = pipeline_scans("OS1-64", 1)[0]
    pcap = _write(tmp_path, "OS1-64", [scan], {"metadata": str(given)})
    want = {p: [r.payload for r in read_pcap_udp(pcap) if r.dst_port == p] for p in (7502, 7503)}
    rx = {p: socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for p in (7502, 7503)}
    for s in rx.values():
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.bind(("127.0.0.1", 0))
        s.settimeout(2.0)
    data_port, imu_port = (rx[p].getsockname()[1] for p in (7502, 7503))
    sink = make_sink(f"ouster-udp:127.0.0.1:{data_port},imu_port={imu_port},metadata={given},latency_ms=20")
    try:
        sink.open(SinkContext(load_preset("OS1-64")))
        sink.write(scan)
        sink.close()
        got = {p: [rx[p].recv(65535) for _ in want[p]] for p in (7502, 7503)}
    finally:
        for s in rx.values():
            s.close()
    assert got == want and len(want[7502]) == 16 and len(want[7503]) == 10
