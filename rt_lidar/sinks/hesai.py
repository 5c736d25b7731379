"""Hesai data packets (``--sink hesai-pcap:FILE``, ``--sink hesai-udp:HOST:PORT``): the layout is the
preset's (:mod:`rt_lidar.sinks.hesai_layouts`: PandarXT-32, OT128 / Pandar128E3X, ...).

Options: ``mode=strongest|last|dual`` (the return mode; dual writes the last and the strongest return
of each firing in a pair of blocks), ``epoch_ns=`` (the wall time of sim time 0 in the packets).
"""

from __future__ import annotations

from collections.abc import Callable

from rt_lidar.errors import ConfigError
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink
from rt_lidar.sinks.hesai_layouts import LAYOUTS, HesaiOT128Packetizer, HesaiXT32Packetizer
from rt_lidar.sinks.hesai_packets import RETURN_MODE_BYTE, HesaiPacketizer, packetizer_factory
from rt_lidar.sinks.pcap import DEFAULT_EPOCH_NS, PacketPcapSink
from rt_lidar.sinks.udp import PACER_OPTIONS, UdpPacketSink

__all__ = [
    "PAYLOAD_BYTES",
    "HesaiOT128Packetizer",
    "HesaiXT32Packetizer",
    "hesai_packetizer",
    "hesai_pcap_sink",
    "hesai_udp_sink",
]

PAYLOAD_BYTES = HesaiXT32Packetizer.PAYLOAD_BYTES
_SENSOR_IP, _DEST_IP = "192.168.1.201", "255.255.255.255"


def hesai_packetizer(
    preset: SensorPreset, mode: str | None = None, epoch_ns: int = DEFAULT_EPOCH_NS
) -> HesaiPacketizer:
    """The packet writer of ``preset``'s Hesai layout; a preset of another layout is refused."""
    for layout in LAYOUTS:
        if preset.packet_format in layout.PACKET_FORMATS:
            return layout(preset, mode=mode, epoch_ns=epoch_ns)
    known = ", ".join(f"{c.PRODUCT} ('{f}')" for c in LAYOUTS for f in c.PACKET_FORMATS)
    raise ConfigError(
        f"preset {preset.name}: packet format '{preset.packet_format}' has no Hesai packet writer; "
        f"the Hesai sinks write {known}"
    )


def _factory(options: dict[str, str], kind: str) -> tuple[Callable[[SinkContext], HesaiPacketizer], dict]:
    return packetizer_factory(options, kind, tuple(RETURN_MODE_BYTE), hesai_packetizer)


@register_sink("hesai-pcap")
def hesai_pcap_sink(target: str, options: dict[str, str]) -> PacketPcapSink:
    """``--sink hesai-pcap:out.pcap[,mode=dual][,epoch_ns=N]`` (a preset of a Hesai layout we write)."""
    SinkOptions("hesai-pcap", options, {"mode", "epoch_ns"})
    make, _ = _factory(options, "hesai-pcap")
    return PacketPcapSink(target, make, _SENSOR_IP, _DEST_IP)


@register_sink("hesai-udp")
def hesai_udp_sink(target: str, options: dict[str, str]) -> UdpPacketSink:
    """``--sink hesai-udp:HOST:PORT[,mode=dual][,latency_ms=50][,clock=wall|sim]``."""
    SinkOptions("hesai-udp", options, {"mode", "epoch_ns"} | PACER_OPTIONS)
    make, rest = _factory(options, "hesai-udp")
    return UdpPacketSink(target or "127.0.0.1:2368", make, rest, {}, kind="hesai-udp")
