"""OT128 packets (``hesai-pcap``, Hesai protocol 1.4) of a preset made from a real OT128 angle-correction
file, read by hydra4's PandarOT128 decoder with the same file: every point back within 4 mm and 0.01
deg, dual returns (last and strongest) in their blocks, and firing times as the vendor's firetime file
times the standard mode's channels."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import with_second_returns
from hesai_compare import compare_points, pick_returns

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.hesai import HesaiOT128Packetizer, hesai_packetizer, hesai_pcap_sink
from rt_lidar.sinks.pcap import read_pcap_udp

hydra4 = pytest.importorskip("hydra4")
from hydra4.decoders import PandarOT128  # noqa: E402
from hydra4.msgs.pandar_msgs import pandar_msgs__msg__PandarPacket  # noqa: E402

HESAI = Path(__file__).resolve().parents[2] / "data" / "vendor" / "hesai"
CSV = HESAI / "OT128_Angle Correction File.csv"
FIRETIME = HESAI / "OT128_Firetime Correction File.csv"


def _preset() -> SensorPreset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_preset(f"{CSV}#model=OT128")


def _standard_mode_firetimes_us() -> np.ndarray:
    """Per channel the firing offset of the standard mode (operational state 2), azimuth state 0, from
    Hesai's OT128 firetime file (its columns: operational state, then azimuth state)."""
    with FIRETIME.open(newline="") as fh:
        rows = list(csv.reader(fh))
    col = next(i for i in range(1, len(rows[0])) if (rows[0][i], rows[1][i]) == ("2", "0"))
    return np.array([float(r[col]) for r in rows[2:]])


def _decode(pcap: Path) -> tuple[np.ndarray, np.ndarray]:
    """(N, 6) x, y, z, intensity, ring, firing time in our frame (hydra4's x is our -y, its y our x),
    and (N,) the block of the packet each point came from."""
    dec = PandarOT128(CSV, 0.05, 1000.0)
    rows, blocks = [], []
    for rec in read_pcap_udp(pcap):
        assert len(rec.payload) == HesaiOT128Packetizer.PAYLOAD_BYTES == 861
        pk = pandar_msgs__msg__PandarPacket(stamp=None, data=np.frombuffer(rec.payload, np.uint8), size=861)
        for b, block in enumerate(dec(pk)):
            rows += [(p[0], p[1], p[2], p[3], p[4], p[6]) for p in block.points]
            blocks += [b] * len(block.points)
    a = np.array(rows, np.float64)
    return np.column_stack([a[:, 1], -a[:, 0], a[:, 2], a[:, 3], a[:, 4], a[:, 5]]), np.array(blocks)


def _write(tmp_path: Path, preset: SensorPreset, scans: list[Scan], mode: str) -> Path:
    pcap = tmp_path / "ot128.pcap"
    sink = hesai_pcap_sink(str(pcap), {"mode": mode})
    sink.open(SinkContext(preset))
    for s in scans:
        sink.write(s)
    sink.close()
    return pcap


@pytest.mark.parametrize("mode", ["strongest", "last", "dual"])
def test_hydra4_reads_our_ot128_packets_with_the_same_file(tmp_path, pipeline_scans, mode):
    preset = _preset()
    assert (preset.model, preset.packet_format, preset.n_rings) == ("OT128", "hesai-ot128", 128)
    scans = list(pipeline_scans(preset, 2))
    if mode == "dual":
        scans = [with_second_returns(s) for s in scans]
    dec, block = _decode(_write(tmp_path, preset, scans, mode))
    parts = {"strongest": [False], "last": [True], "dual": [True, False]}[mode]
    for b, last in enumerate(parts):
        picked = [s.points[pick_returns(s.points, last)] for s in scans]
        ours = np.concatenate(picked)
        starts = np.concatenate(
            [np.full(len(p), s.start_ns, np.int64) for s, p in zip(scans, picked, strict=True)]
        )
        mine = dec[block == b] if mode == "dual" else dec
        assert len(mine) == len(ours) > 10_000
        worst = compare_points(mine, ours, starts, _standard_mode_firetimes_us())
        assert worst["r"] < 0.0021 and worst["az"] < 0.01 and worst["el"] < 0.01, worst
        assert worst["t_us"] < 1.5, worst  # the tail has whole microseconds
    if mode == "dual":  # the second returns we added are in the first (last-return) blocks
        assert len(dec[block == 0]) == len(dec[block == 1])
        assert not np.allclose(dec[block == 0][:, :3], dec[block == 1][:, :3])


def test_packets_are_the_ot128_layout(pipeline_scans):
    preset = _preset()
    pz = hesai_packetizer(preset, mode="strongest")
    assert isinstance(pz, HesaiOT128Packetizer)
    (batch,) = pz.packetize(pipeline_scans(preset, 1)[0])
    pk = [p.tobytes() for p in batch.payloads]
    assert pk[0][:4] == b"\xee\xff\x01\x04" and pk[0][6:12] == bytes((128, 2, 0, 4, 1, 0x07))
    tail = 12 + 2 * (2 + 3 * 128) + 4 + 17
    assert tail + 56 == len(pk[0]) == 861
    assert pk[0][tail + 11] == 2 and pk[0][tail + 12] == 0x37  # standard mode, strongest return
    assert int.from_bytes(pk[0][tail + 13 : tail + 15], "little") == 600  # rpm at 10 Hz
    seq = [int.from_bytes(p[tail + 26 : tail + 30], "little") for p in pk]
    assert np.all(np.diff(seq) == 1)
    az = np.array([[int.from_bytes(p[o : o + 2], "little") for o in (12, 12 + 386)] for p in pk])
    assert set(((az[:, 1] - az[:, 0]) % 36000).tolist()) == {20}  # 0.2 deg a column: 1800 a turn
    assert set(((az[1:, 0] - az[:-1, 0]) % 36000).tolist()) == {40}
    # 900 packets a turn, each sent as its second column's firing completes
    assert len(batch) in (899, 900) and set(np.diff(batch.send_ns).tolist()) <= {111_111, 111_112}
    dual = hesai_packetizer(preset, mode="dual").packetize(pipeline_scans(preset, 1)[0])[0]
    d0 = dual.payloads[0].tobytes()
    assert d0[6:12] == bytes((128, 2, 1, 4, 2, 0x07)) and d0[tail + 12] == 0x39
    assert d0[12:14] == d0[12 + 386 : 14 + 386]  # both blocks are one firing


def test_pandar128e3x_writes_the_same_layout():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        preset = load_preset(f"{CSV}#model=Pandar128E3X")
    assert isinstance(hesai_packetizer(preset), HesaiOT128Packetizer)
