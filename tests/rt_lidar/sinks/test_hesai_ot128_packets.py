"""OT128 packets (``hesai-pcap``, Hesai protocol 1.4) of a preset made from a real OT128 angle-correction
file, read by hydra4's PandarOT128 decoder with the same file: every point back within 4 mm and 0.01
deg, dual returns (last and strongest) in their blocks, and firing times. Without the firetime file
the preset fires a column's channels together, and hydra4's times are ours plus the file's standard-mode
offsets; with it (``#firetime=``) the preset fires each channel at its offset in the column's azimuth
state, the tail says each block's state, and hydra4's times are ours as they are. hydra4 places a point
at its block's azimuth; Hesai's SDK 2.0 (``udp1_4_parser``) turns it by the rotation over the channel's
firing offset in that state, as done here with the file's numbers."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import pcap_of
from hesai_compare import compare_points, pick_returns

from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sinks.hesai import HesaiOT128Packetizer, hesai_packetizer, hesai_pcap_sink
from rt_lidar.sinks.pcap import read_pcap_udp

hydra4 = pytest.importorskip("hydra4")
from hydra4.decoders import PandarOT128  # noqa: E402
from hydra4.msgs.pandar_msgs import pandar_msgs__msg__PandarPacket  # noqa: E402

HESAI = Path(__file__).resolve().parents[2] / "data" / "vendor" / "hesai"
CSV = HESAI / "OT128_Angle Correction File.csv"
FIRETIME = HESAI / "OT128_Firetime Correction File.csv"


def _preset(firetime: bool = False) -> SensorPreset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_preset(f"{CSV}#model=OT128" + (f",firetime={FIRETIME}" if firetime else ""))


def _standard_mode_firetimes_us() -> np.ndarray:
    """(2, 128) per azimuth state, per channel the firing offset of the standard mode (operational
    state 2) in Hesai's OT128 firetime file (its columns: operational state, then azimuth state)."""
    with FIRETIME.open(newline="") as fh:
        rows = list(csv.reader(fh))
    cols = [next(i for i in range(1, len(rows[0])) if (rows[0][i], rows[1][i]) == ("2", a)) for a in "01"]
    return np.array([[float(r[c]) for r in rows[2:]] for c in cols])


def _decode(pcap: Path, sdk_turn: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N, 6) x, y, z, intensity, ring, firing time in our frame (hydra4's x is our -y, its y our x),
    (N,) the block of the packet each point came from and (N,) its block's azimuth state (the tail's
    bits 15-14, 13-12). ``sdk_turn``: each point turned clockwise by the rotation over its channel's
    firing offset in that state (from the file), as Hesai's SDK places it."""
    dec = PandarOT128(CSV, 0.05, 1000.0)
    fire = _standard_mode_firetimes_us()
    rows, blocks, states = [], [], []
    for rec in read_pcap_udp(pcap):
        assert len(rec.payload) == HesaiOT128Packetizer.PAYLOAD_BYTES == 861
        tail = HesaiOT128Packetizer.TAIL
        word = int.from_bytes(rec.payload[tail + 9 : tail + 11], "little")
        rpm = int.from_bytes(rec.payload[tail + 13 : tail + 15], "little")
        pk = pandar_msgs__msg__PandarPacket(stamp=None, data=np.frombuffer(rec.payload, np.uint8), size=861)
        for b, block in enumerate(dec(pk)):
            state = (word >> (14 - 2 * b)) & 3
            for p in block.points:
                x, y = p[0], p[1]
                if sdk_turn:
                    turn = np.radians(fire[state, p[4]] * rpm * 6e-6)
                    x, y = x * np.cos(turn) + y * np.sin(turn), y * np.cos(turn) - x * np.sin(turn)
                rows.append((x, y, p[2], p[3], p[4], p[6]))
            blocks += [b] * len(block.points)
            states += [state] * len(block.points)
    a = np.array(rows, np.float64)
    ours = np.column_stack([a[:, 1], -a[:, 0], a[:, 2], a[:, 3], a[:, 4], a[:, 5]])
    return ours, np.array(blocks), np.array(states)


@pytest.mark.parametrize(
    ("mode", "firetime"),
    [("strongest", False), ("last", False), ("dual", False), ("strongest", True), ("dual", True)],
)
def test_hydra4_reads_our_ot128_packets_with_the_same_file(tmp_path, pipeline_scans, mode, firetime):
    preset = _preset(firetime)
    assert (preset.model, preset.packet_format, preset.n_rings) == ("OT128", "hesai-ot128", 128)
    pcap = tmp_path / "ot128.pcap"
    scans = pcap_of(hesai_pcap_sink, pcap, preset, list(pipeline_scans(preset, 2)), mode)
    dec, block, state = _decode(pcap, sdk_turn=firetime)
    # hydra4 adds the file's offset of the block's state: with the file, our times are already the
    # firing's; without it every channel fired with its column (the tail says state 0)
    fire_us = np.zeros(128) if firetime else _standard_mode_firetimes_us()[0]
    assert set(np.unique(state).tolist()) == ({0, 1} if firetime else {0})
    parts = {"strongest": [False], "last": [True], "dual": [True, False]}[mode]
    for b, last in enumerate(parts):
        picked = [s.points[pick_returns(s.points, last)] for s in scans]
        ours = np.concatenate(picked)
        starts = np.concatenate(
            [np.full(len(p), s.start_ns, np.int64) for s, p in zip(scans, picked, strict=True)]
        )
        mine = dec[block == b] if mode == "dual" else dec
        assert len(mine) == len(ours) > 10_000
        worst = compare_points(mine, ours, starts, fire_us)
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
