"""PandarXT-32 packets (``hesai-pcap``) of a preset made from a real XT32 angle-correction file, read by
hydra4's PandarXT32 decoder with the same file: every point back, within 4 mm and 0.01 deg."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import pcap_of
from hesai_compare import compare_points, pick_returns

from rt_lidar.errors import ConfigError
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sinks.hesai import PAYLOAD_BYTES, HesaiXT32Packetizer, hesai_pcap_sink
from rt_lidar.sinks.pcap import read_pcap_udp

hydra4 = pytest.importorskip("hydra4")
from hydra4.decoders import PandarXT32  # noqa: E402
from hydra4.msgs.pandar_msgs import pandar_msgs__msg__PandarPacket  # noqa: E402

CSV = Path(__file__).resolve().parents[2] / "data" / "vendor" / "hesai" / "nebula_PandarXT32.csv"


def _preset() -> SensorPreset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_preset(f"{CSV}#model=PandarXT-32")


def _decode(pcap: Path) -> np.ndarray:
    """(N, 5) x, y, z, intensity, ring in our frame (hydra4's x is our -y, its y our x)."""
    dec = PandarXT32(CSV, 0.05, 1000.0)
    rows = []
    for rec in read_pcap_udp(pcap):
        assert len(rec.payload) == PAYLOAD_BYTES
        pk = pandar_msgs__msg__PandarPacket(stamp=None, data=np.frombuffer(rec.payload, np.uint8), size=1080)
        for block in dec(pk):
            rows += [p[:5] for p in block.points]
    a = np.array(rows, np.float64)
    return np.column_stack([a[:, 1], -a[:, 0], a[:, 2], a[:, 3], a[:, 4]])


@pytest.mark.parametrize("mode", ["strongest", "dual"])
def test_hydra4_reads_our_xt32_packets_with_the_same_file(tmp_path, pipeline_scans, mode):
    preset = _preset()
    assert (preset.model, preset.packet_format) == ("PandarXT-32", "hesai-xt32")
    pcap = tmp_path / "xt32.pcap"
    scans = pcap_of(hesai_pcap_sink, pcap, preset, list(pipeline_scans(preset, 2)), mode)
    dec = _decode(pcap)
    if mode == "dual":  # hydra4 reads the first block of each pair: the last (farthest) return
        ours = np.concatenate([s.points[pick_returns(s.points, last=True)] for s in scans])
    else:
        ours = np.concatenate([s.points for s in scans])
    assert len(dec) == len(ours)
    worst = compare_points(dec, ours)
    assert worst["r"] < 0.0021 and worst["az"] < 0.01 and worst["el"] < 0.01, worst


def test_packets_are_the_xt32_layout(pipeline_scans):
    preset = _preset()
    pz = HesaiXT32Packetizer(preset, mode="strongest")
    (batch,) = pz.packetize(pipeline_scans(preset, 1)[0])
    pk = batch.payloads[0].tobytes()
    assert pk[:4] == b"\xee\xff\x06\x01" and pk[6:12] == bytes((32, 8, 0, 4, 1, 0))
    assert pk[1052 + 10] == 0x37 and int.from_bytes(pk[1052 + 11 : 1052 + 13], "little") == 600  # 10 Hz
    az = [int.from_bytes(pk[12 + b * 130 : 14 + b * 130], "little") for b in range(8)]
    steps = {(b - a) % 36000 for a, b in itertools.pairwise(az)}
    assert steps == {18}  # 0.18 deg a firing at 10 Hz: 2000 firings a turn
    # 500 packets a turn, sent as their last firing completes
    assert len(batch) in (249, 250) and np.all(np.diff(batch.send_ns) == 400_000)


def test_other_presets_are_refused():
    with pytest.raises(ConfigError, match="writes the PandarXT-32's"):
        HesaiXT32Packetizer(load_preset("Pandar64"))
