"""The new UDP sinks over loopback (lockstep, sim clock): every datagram the pcap sink writes for the
same scans arrives, byte for byte, at the port given (an OT128 through ``hesai-udp``, an RS-32 through
``robosense-udp``)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from udp_listen import datagrams

from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.hesai import hesai_pcap_sink, hesai_udp_sink
from rt_lidar.sinks.pcap import read_pcap_udp
from rt_lidar.sinks.robosense import robosense_pcap_sink, robosense_udp_sink

DATA = Path(__file__).resolve().parents[2] / "data" / "vendor"


@pytest.mark.parametrize(
    ("ref", "pcap_sink", "udp_sink", "size"),
    [
        ("hesai/OT128_Angle Correction File.csv#model=OT128", hesai_pcap_sink, hesai_udp_sink, 861),
        ("robosense/rs_lidar_32/angle.csv", robosense_pcap_sink, robosense_udp_sink, 1248),
    ],
    ids=["hesai-udp-ot128", "robosense-udp-rs32"],
)
def test_udp_sends_what_the_pcap_holds(tmp_path, pipeline_scans, ref, pcap_sink, udp_sink, size):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        preset = load_preset(str(DATA / ref))
    scans = list(pipeline_scans(preset, 1))
    pcap = tmp_path / "ref.pcap"
    sink = pcap_sink(str(pcap), {})
    sink.open(SinkContext(preset))
    for s in scans:
        sink.write(s)
    sink.close()
    want = [rec.payload for rec in read_pcap_udp(pcap)]

    with datagrams() as (port, got):
        sink = udp_sink(f"127.0.0.1:{port}", {"clock": "sim", "process": "0"})
        sink.open(SinkContext(preset, lockstep=True))
        for s in scans:
            sink.write(s)
        sink.close()
    assert len(want) > 100 and {len(p) for p in want} == {size}
    assert got == want
