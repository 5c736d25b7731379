"""Damaged and hostile input files: each gets one clear error line naming the file and the field.

settings.json lidar blocks, PCD files, pcap files, a pcap whose next record is stamped 1e6 s later
(replay must not wait for it), a preset too large for memory. Real files in ``tmp_path``; the CLI's
own error path (``rt-lidar ...: error: ...``, exit 2) where a command reads them.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.bridge.airsim_settings import preset_from_airsim_settings
from rt_lidar.cli.main import main
from rt_lidar.errors import FieldError, PresetError
from rt_lidar.points import POINT_DTYPE
from rt_lidar.sensor.presets import MAX_SCAN_POINTS, load_preset
from rt_lidar.sinks.pcap import PcapWriter, read_pcap_udp
from rt_lidar.sinks.pcd import read_pcd_points, write_pcd
from rt_lidar.sinks.replay import replay_offsets_ns, replay_pcap

LIDAR = "Vehicles.Car1.Sensors.Lidar1"


def settings_with(channels: object) -> dict[str, object]:
    block = {"SensorType": 6, "Enabled": True, "NumberOfChannels": channels, "RotationsPerSecond": 10}
    return {"SettingsVersion": 1.2, "Vehicles": {"Car1": {"Sensors": {"Lidar1": block}}}}


def one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


# -- settings.json -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("channels", "says"),
    [
        (0, "must be in [1, 4096], got 0"),
        (1e9, "must be an integer, got float"),
        (1_000_000_000, "must be in [1, 4096]"),
        ("16", "must be an integer, got str"),
        (float("nan"), "must be an integer, got float nan"),
    ],
)
def test_settings_number_of_channels_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], channels: object, says: str
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings_with(channels)))  # json writes NaN as NaN, as a hand edit might
    with pytest.raises(FieldError) as info:
        preset_from_airsim_settings(json.loads(path.read_text()), source=str(path))
    assert info.value.field == f"{LIDAR}.NumberOfChannels" and says in info.value.problem
    err = one_error_line(capsys, ["serve", "--settings", str(path), "--port", "0"])
    assert str(path) in err and "NumberOfChannels" in err and says in err


def test_settings_top_level_array_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "settings.json"
    path.write_text("[1, 2, 3]")
    err = one_error_line(capsys, ["serve", "--settings", str(path), "--port", "0"])
    assert str(path) in err and "(top level)" in err and "JSON object" in err


def test_settings_points_per_second_making_a_huge_scan_is_refused(tmp_path: Path) -> None:
    settings = settings_with(1)
    settings["Vehicles"]["Car1"]["Sensors"]["Lidar1"]["PointsPerSecond"] = 1e8  # type: ignore[index]
    with pytest.raises(FieldError, match=r"PointsPerSecond.*at most 100,000"):
        preset_from_airsim_settings(settings, source="s.json")


def test_a_valid_settings_block_still_gives_its_preset() -> None:
    assert preset_from_airsim_settings(settings_with(16)).n_rings == 16


# -- PCD -----------------------------------------------------------------------------------------


def pcd(tmp_path: Path, header: str, body: bytes = b"") -> Path:
    path = tmp_path / "bad.pcd"
    path.write_bytes(header.encode() + body)
    return path


HEAD = (
    "VERSION 0.7\nFIELDS x y z\nSIZE {size}\nTYPE {type}\nCOUNT 1 1 1\nWIDTH {n}\nHEIGHT 1\n"
    "POINTS {n}\nDATA {mode}\n"
)


@pytest.mark.parametrize(
    ("fmt", "body", "field", "says"),
    [
        ({"size": "4 4 4", "type": "F F X", "n": 1, "mode": "binary"}, b"\0" * 12, "TYPE", "F, I or U"),
        ({"size": "4 4 3", "type": "F F F", "n": 1, "mode": "binary"}, b"\0" * 12, "SIZE", "must be 2, 4, 8"),
        ({"size": "4 4", "type": "F F F", "n": 1, "mode": "binary"}, b"\0" * 12, "SIZE", "2 values for 3"),
        ({"size": "4 4 4", "type": "F F F", "n": 2, "mode": "ascii"}, b"1 2 3\n4 5\n", "DATA", "row 2 has 2"),
        (
            {"size": "4 4 4", "type": "F F F", "n": 3, "mode": "ascii"},
            b"1.0 2.0 3.0\n4.0 5.0 6.0\n",
            "POINTS",
            "2 data rows",
        ),
        ({"size": "4 4 4", "type": "F F F", "n": 10**12, "mode": "binary"}, b"\0" * 12, "POINTS", "need"),
        (
            {"size": "4 4 4", "type": "F F F", "n": 10**12, "mode": "ascii"},
            b"1 2 3\n",
            "POINTS",
            "cannot fit",
        ),
        ({"size": "4 4 4", "type": "F F F", "n": -1, "mode": "binary"}, b"", "POINTS", "must be in"),
        ({"size": "4 4 4", "type": "F F F", "n": 1, "mode": "lzf"}, b"", "DATA", "not supported"),
        (
            {"size": "4 4 4", "type": "F F F", "n": 1, "mode": "binary_compressed"},
            b"",
            "DATA",
            "without its two 4-byte sizes",
        ),
        (
            {"size": "4 4 4", "type": "F F F", "n": 1, "mode": "binary_compressed"},
            b"\x03\x00\x00\x00\x0c\x00\x00\x00\x05\x00\x00",  # a literal run of 6 cut to 2 bytes
            "DATA",
            "LZF literal run past the end",
        ),
    ],
)
def test_bad_pcd_files_name_the_file_and_field(
    tmp_path: Path, fmt: dict[str, object], body: bytes, field: str, says: str
) -> None:
    path = pcd(tmp_path, HEAD.format(**fmt), body)
    with pytest.raises(FieldError) as info:
        read_pcd_points(path)
    assert info.value.source == str(path) and info.value.field == field, info.value
    assert says in info.value.problem, info.value


def test_pcd_with_huge_points_allocates_nothing_of_that_size(tmp_path: Path) -> None:
    import tracemalloc

    path = pcd(tmp_path, HEAD.format(size="4 4 4", type="F F F", n=10**9, mode="ascii"), b"1 2 3\n" * 10)
    tracemalloc.start()
    with pytest.raises(FieldError):
        read_pcd_points(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1 << 20


def test_pcl_padding_fields_are_read_and_repeated_fields_refused(tmp_path: Path) -> None:
    head = "FIELDS x _ y _\nSIZE 4 4 4 4\nTYPE F F F F\nCOUNT 1 1 1 1\nPOINTS 1\nDATA binary\n"
    body = np.array([1.0, 0.0, 2.0, 0.0], "<f4").tobytes()
    assert read_pcd_points(pcd(tmp_path, head, body))[["x", "y"]].tolist() == [(1.0, 2.0)]
    with pytest.raises(FieldError, match="twice"):
        read_pcd_points(pcd(tmp_path, head.replace("x _ y _", "x y y z"), body))


def test_good_pcd_files_still_read(tmp_path: Path) -> None:
    pts = np.zeros(5, POINT_DTYPE)
    pts["x"] = np.arange(5)
    assert np.array_equal(read_pcd_points(write_pcd(tmp_path / "ok.pcd", pts))["x"], pts["x"])
    path = pcd(tmp_path, HEAD.format(size="4 4 4", type="F F F", n=2, mode="ascii"), b"1 2 3\n4 5 6\n")
    assert read_pcd_points(path)["z"].tolist() == [3.0, 6.0]


# -- pcap ----------------------------------------------------------------------------------------


def write_pcap(path: Path, stamps_ns: list[int], dst_port: int = 2368) -> Path:
    writer = PcapWriter(path)
    for i, stamp in enumerate(stamps_ns):
        payload = np.full((1, 32), i, np.uint8)
        writer.write_batch(payload, np.array([stamp]), "192.168.1.201", "127.0.0.1", 2368, dst_port)
    writer.close()
    return path


def test_pcap_ip_header_length_past_the_frame(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "bad.pcap", [0, 1_000_000])
    data = bytearray(path.read_bytes())
    data[24 + 16 + 14] = 0x4F  # record 0: IHL 15 words = 60 bytes, past the 42 + 32-byte frame's UDP
    path.write_bytes(bytes(data))
    with pytest.raises(FieldError) as info:
        list(read_pcap_udp(path))
    assert info.value.field == "record 0.ipv4.ihl" and info.value.source == str(path)
    err = one_error_line(capsys, ["replay", str(path), "--sink", "udp:127.0.0.1:9"])
    assert str(path) in err and "record 0.ipv4.ihl" in err


def test_pcap_udp_length_past_the_frame_and_bad_magic(tmp_path: Path) -> None:
    path = write_pcap(tmp_path / "bad.pcap", [0])
    data = bytearray(path.read_bytes())
    struct.pack_into(">H", data, 24 + 16 + 14 + 20 + 4, 5000)  # UDP length 5000 in a 74-byte frame
    path.write_bytes(bytes(data))
    with pytest.raises(FieldError, match=r"record 0\.udp\.length"):
        list(read_pcap_udp(path))
    path.write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(40))  # pcapng
    with pytest.raises(FieldError, match="magic"):
        list(read_pcap_udp(path))


def test_a_record_1e6_s_later_does_not_hang_replay(tmp_path: Path) -> None:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(5)
    path = write_pcap(tmp_path / "gap.pcap", [0, 1_000_000, 10**15 + 1_000_000])  # the third: 1e6 s on
    t0 = time.monotonic()
    stats = replay_pcap(path, "127.0.0.1", rx.getsockname()[1], max_gap_s=0.5)
    took = time.monotonic() - t0
    got = [rx.recv(100)[0] for _ in range(3)]
    rx.close()
    assert stats.sent == 3 and got == [0, 1, 2]
    assert 0.4 < took < 3.0, took  # the gap replayed as 0.5 s


def test_replay_offsets_clip_gaps_and_backward_stamps() -> None:
    offsets, cut = replay_offsets_ns([10, 20, 10**16, 5, 7], max_gap_s=1.0)
    assert offsets.tolist() == [0, 10, 1_000_000_010, 1_000_000_010, 1_000_000_012] and cut == 1


# -- presets ------------------------------------------------------------------------------------


def test_a_preset_too_large_for_memory_names_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (Path(__file__).parents[2] / "sensor_presets" / "os1-128.toml").read_text()
    assert "columns_per_rev = 1024" in text
    path = tmp_path / "huge.toml"
    path.write_text(text.replace("columns_per_rev = 1024", "columns_per_rev = 100000"))  # in range
    with pytest.raises(PresetError) as info:
        load_preset(path)
    assert info.value.field == "scan.columns_per_rev" and f"at most {MAX_SCAN_POINTS:,}" in info.value.problem
    err = one_error_line(capsys, ["serve", "--preset", str(path), "--port", "0"])
    assert str(path) in err and "scan.columns_per_rev" in err


@pytest.mark.parametrize("value", ["0", "-5", "1e9", "many"])
def test_serve_max_rays_out_of_range_is_one_line(capsys: pytest.CaptureFixture[str], value: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", "--max-rays", value])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--max-rays" in err[-1] and "Traceback" not in "\n".join(err)
