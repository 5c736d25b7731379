"""Packets of presets made from real vendor files decode with the vendors' decoders and the same file:
velodyne-decoder with the calibration YAML, ouster-sdk (its own venv) with the metadata JSON."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import velodyne_pcap_of
from test_ouster_profiles import PEER, _decode
from test_velodyne import _agreement

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.ouster import OusterPacketizer, ouster_pcap_sink
from rt_lidar.sinks.ouster_meta import read_metadata

vd = pytest.importorskip("velodyne_decoder")

DATA = Path(__file__).resolve().parents[2] / "data" / "vendor"
# our packet layout -> velodyne-decoder's model of it (a VLP-32A's packets are the VLP-32C's layout)
DECODER_MODEL = {
    "velodyne-vlp16": "VLP16",
    "velodyne-vlp32c": "VLP32C",
    "velodyne-hdl32": "HDL32E",
    "velodyne-hdl64": "HDL64E_S2",
    "velodyne-vls128": "VLS128",
}


def _after(scan: Scan, t_ns: int) -> Scan:
    """``scan`` without the points fired before sim time ``t_ns``."""
    keep = scan.points["t"] + scan.start_ns >= t_ns
    return Scan(scan.index, scan.start_ns, scan.points[keep], scan.fired, scan.dropped, scan.frames)


def _preset(ref: str) -> SensorPreset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the model a file does not name is guessed (and said)
        return load_preset(ref)


@pytest.mark.parametrize(
    "ref",
    [
        "velodyne/VLP-32A.yml",
        "velodyne/Puck Hi-Res.yml",
        "velodyne/32db.yaml",
        "velodyne/VLP16db.yaml#model=Puck LITE",
        "velodyne/Alpha Prime.yml",
    ],
)
@pytest.mark.parametrize("mode", ["strongest", "dual"])
def test_velodyne_decoder_reads_our_packets_with_the_same_file(tmp_path, pipeline_scans, ref, mode):
    file, _, opts = ref.partition("#")
    full = f"{DATA / file}#{opts}" if opts else str(DATA / file)
    preset = _preset(full)
    pcap = tmp_path / "v.pcap"
    scans = velodyne_pcap_of(pcap, preset, list(pipeline_scans(preset, 2)), mode)
    cfg = vd.Config(max_range=1000.0)
    cfg.model = getattr(vd.Model, DECODER_MODEL[preset.packet_format])
    cfg.calibration = vd.Calibration.read(str(DATA / file))  # the vendor's file, not one we wrote
    parts = []
    for stamp, pts in vd.read_pcap(str(pcap), cfg):
        times = stamp.device + pts[:, vd.PointField.time].astype(np.float64)
        parts.append(np.column_stack([pts.astype(np.float64), times]))
    dec = np.concatenate(parts)
    if preset.packet_format == "velodyne-vls128":
        # velodyne_decoder turns a VLS-128 firing's azimuth by the rotation rate it measures between
        # packets, and times it by the channel duration it measures between them: the stream's first
        # packet has neither. Compare from the second packet on (3 sequences of 53.33 us, 1 in dual).
        keep = np.ones(len(dec), bool)
        first_packet = 3 if mode != "dual" else 1  # columns: 3 a packet, 1 in dual mode
        keep[: len(parts[0])] = parts[0][:, vd.PointField.column] >= first_packet
        dec = dec[keep]
        scans = [_after(s, first_packet * 53_333 - 1_000) for s in scans]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        err = _agreement(full, scans, dec, mode)
    assert err["range_m"] < 0.01
    assert err["azimuth_deg"] <= 0.015  # the packets' 0.01 deg azimuth, interpolated by the decoder
    assert err["time_us"] < 2.0
    # elevations: the decoder places each ring at the file's vert_correction
    ours = np.concatenate([s.points for s in scans])
    el = {
        int(r): float(np.degrees(np.arcsin(z / n)))
        for r, z, n in zip(
            dec[:, vd.PointField.ring], dec[:, 2], np.linalg.norm(dec[:, :3], axis=1), strict=True
        )
    }
    for ring, e in el.items():
        assert e == pytest.approx(preset.elevations_deg[ring], abs=0.01)
    assert len(el) == len(set(ours["ring"].tolist()))


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
def test_ouster_sdk_reads_our_packets_with_the_same_file(tmp_path, pipeline_scans, name):
    given = DATA / "ouster" / name
    preset = _preset(str(given))
    scans = list(pipeline_scans(preset, 1))
    pcap = tmp_path / "os.pcap"
    sink = ouster_pcap_sink(str(pcap), {"metadata": str(given)})
    sink.open(SinkContext(preset))
    sink.write(scans[0])
    sink.close()
    dec = _decode(tmp_path, pcap, given, given)  # ouster-sdk with the vendor's file itself
    meta = read_metadata(tmp_path / "os.json")
    pz = OusterPacketizer(preset, meta)
    inside = np.zeros(pz.cols, bool)
    inside[pz.format.window_columns()] = True
    img = pz.image(scans[0])
    quantum = 8 if "RNG15" in str(dec["given"][0]) else 1
    want = np.minimum((img["range"] + 4) >> 3, (1 << 15) - 1) << 3 if quantum == 8 else img["range"]
    assert int(dec["n"]) == 1
    np.testing.assert_array_equal(dec["RANGE"][0][:, inside], want[:, inside])
    assert (dec["RANGE"][0] > 0).sum() > 0.3 * inside.sum() * pz.h * 0.1
    # where ouster-sdk puts these pixels (the file's beam origins included): test_beam_origin_packets
