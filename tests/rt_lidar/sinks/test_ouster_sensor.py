"""The emulated Ouster sensor (``--sink ouster-sensor:127.0.0.x``): ouster-sdk 1.0's live client (its own
venv, tools/setup_ouster_peer.sh) configures it over HTTP and reads frames from its UDP packets, with no
pcap in between; its IMU packets decoded by ouster-sdk's PacketFormat; the HTTP API by plain requests.

The sensor serves HTTP on port 80 of a loopback address (root, as the project's machines run)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from peers import needs_peer, peer_python

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.points import empty_points
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.base import SinkContext, make_sink
from rt_lidar.sinks.ouster_sensor import OusterSensorSink

ROOT = Path(__file__).resolve().parents[3]
PEER = peer_python("ouster")
DATA = Path(__file__).resolve().parent / "data" / "ouster"
PERIOD = 100_000_000
LATE_MS_FOR_COUNTS = 2000.0
"""The pacer's late limit where a test counts datagrams (the sink's own 50 ms is for live rigs)."""

LIVE = """
import json, sys, numpy as np
from ouster.sdk import open_source
host, out = sys.argv[1], sys.argv[5]
lidar_port, imu_port, n = (int(a) for a in sys.argv[2:5])
src = open_source(host, lidar_port=lidar_port, imu_port=imu_port, timeout=10.0)
ids, fields = [], {}
for fs in src:
    f = fs[0]
    if not f.complete():  # the first frame starts wherever the client joined
        continue
    ids.append(f.frame_id)
    for name in ("RANGE", "REFLECTIVITY", "RANGE2"):
        if f.has_field(name):
            fields.setdefault(name, []).append(f.field(name).astype(np.int64))
    if len(ids) == n:
        break
info = src.sensor_info[0]
src.close()
np.savez(out, ids=np.array(ids), profile=str(info.format.udp_profile_lidar), init_id=info.init_id,
         sn=info.sn, **{k: np.stack(v) for k, v in fields.items()})
"""

IMU = """
import sys, numpy as np
from ouster.sdk import core
info = core.SensorInfo(open(sys.argv[1]).read())
pf = core.PacketFormat(info)
raw = np.load(sys.argv[2])
ts = np.array([pf.imu_sys_ts(row) for row in raw], np.int64)
keys = ("la_x", "la_y", "la_z", "av_x", "av_y", "av_z")
vals = [[getattr(pf, "imu_" + k)(row) for k in keys] for row in raw]
np.savez(sys.argv[3], ts=ts, vals=np.array(vals, np.float64))
"""


def _free_udp_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class _Running:
    """An emulated sensor fed scans at wall-clock pace by a thread until stopped."""

    def __init__(self, spec: str, preset: str, scans: list[Scan]) -> None:
        self.sink = make_sink(spec)
        assert isinstance(self.sink, OusterSensorSink)
        try:
            self.sink.open(SinkContext(load_preset(preset)))
        except ConfigError as exc:
            pytest.skip(f"cannot serve the sensor's HTTP port here: {exc}")
        self.base, self.stop = scans, threading.Event()
        self.written: dict[int, Scan] = {}
        self.thread = threading.Thread(target=self._feed, daemon=True)
        self.thread.start()

    def _feed(self) -> None:
        t0 = time.perf_counter()
        k = 0
        while not self.stop.is_set() and k < 600:
            b = self.base[k % len(self.base)]
            scan = Scan(k, k * PERIOD, b.points, b.fired, b.dropped, sensor_position=b.sensor_position)
            self.written[k & 0xFFFF] = scan
            self.sink.write(scan)
            k += 1
            time.sleep(max(0.0, t0 + k * PERIOD * 1e-9 - time.perf_counter()))

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sink.close()


def _live_frames(tmp_path: Path, host: str, n: int) -> dict[str, np.ndarray]:
    lidar, imu = _free_udp_ports(2)
    (tmp_path / "live.py").write_text(LIVE)
    out = tmp_path / "live.npz"
    args = [str(PEER), str(tmp_path / "live.py"), host, str(lidar), str(imu), str(n), str(out)]
    run = subprocess.run(args, timeout=90, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    with np.load(out) as z:
        res = dict(z)
    res["ports"] = np.array([lidar, imu])
    return res


@needs_peer("ouster")
@pytest.mark.parametrize(
    ("host", "options", "profile", "api"),
    [
        ("127.0.0.2", ",profile=RNG19", "RNG19_RFL8_SIG16_NIR16", "config"),  # fw 3.1: /sensor/config
        (
            "127.0.0.3",
            f",metadata={DATA / 'os1-64_fw3.0.1_dual_nested.json'}",
            "RNG19_RFL8_SIG16_NIR16_DUAL",
            "cmd",
        ),
        ("127.0.0.4", ",profile=FUSA", "FUSA_RNG15_RFL8_NIR8_DUAL", "config"),  # FUSA packet header
    ],
)
def test_ouster_sdk_live_client_reads_frames(tmp_path, pipeline_scans, host, options, profile, api):
    """``open_source(ADDRESS)``: the client reads the firmware, sets udp_dest (@auto: its own address)
    and its ports, reinitialises, fetches the metadata and reads whole frames equal to ours."""
    spec = f"ouster-sensor:{host}{options},latency_ms=150,late_ms=100"  # room for a loaded machine
    sensor = _Running(spec, "OS1-64", list(pipeline_scans("OS1-64", 2)))
    try:
        got = _live_frames(tmp_path, host, 3)
    finally:
        sensor.close()
    state = sensor.sink.state
    assert state is not None
    assert state.active["udp_dest"] == "127.0.0.1"  # the caller's address
    assert [state.active["udp_port_lidar"], state.active["udp_port_imu"]] == got["ports"].tolist()
    assert state.reinits >= 1 and str(got["profile"]) == profile
    assert (int(got["init_id"]), int(got["sn"])) == (
        state.packetizer.format.init_id,
        state.packetizer.format.prod_sn,
    )
    fw = state.firmware()
    assert ("v3.1.0" in fw) == (api == "config") and ("v3.0.1" in fw) == (api == "cmd")
    assert len(got["ids"]) == 3 and np.all(np.diff(got["ids"]) == 1)  # consecutive whole frames
    for k, fid in enumerate(got["ids"].tolist()):
        img = state.packetizer.image(sensor.written[fid])
        rng, rng2 = img["range"], img["range2"]
        if profile.startswith("FUSA"):  # 8 mm units
            rng, rng2 = (np.minimum((r + 4) >> 3, (1 << 15) - 1) << 3 for r in (rng, rng2))
        np.testing.assert_array_equal(got["RANGE"][k], rng)
        np.testing.assert_array_equal(got["REFLECTIVITY"][k], img["reflectivity"])
        if profile.endswith("_DUAL"):
            np.testing.assert_array_equal(got["RANGE2"][k], rng2)
    assert sensor.sink.sent["imu"] > 0


def _http(host: str, path: str, body: dict | None = None) -> tuple[int, object]:
    req = urllib.request.Request(
        f"http://{host}{path}", data=None if body is None else json.dumps(body).encode()
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _accelerating_turning_scans(n: int) -> list[Scan]:
    """Empty rotations of a sensor speeding up at 2 m/s^2 along x while yawing at 30 deg/s."""
    out = []
    for k in range(n):
        t = k * PERIOD * 1e-9
        yaw = np.radians(30.0) * t
        q = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
        out.append(
            Scan(
                k,
                k * PERIOD,
                empty_points(),
                0,
                0,
                sensor_position=np.array([t * t, 0.0, 0.0]),
                sensor_rotation=q,
            )
        )
    return out


@needs_peer("ouster")
def test_http_api_and_imu_packets(tmp_path):
    """Configured by plain HTTP (fw 2.4-3.0 cmd API and the 3.1 config API): the lidar packet profile
    switches on reinitialise, a lidar mode the preset cannot fire is refused naming the field, and the
    IMU packets (decoded by ouster-sdk's PacketFormat) read 1 g up plus the sensor's acceleration and
    its 30 deg/s yaw."""
    host = "127.0.0.4"
    # every datagram counted: a stall of the loaded test machine must not make the pacer drop them late
    sink = OusterSensorSink(host, None, None, "test", late_ms=LATE_MS_FOR_COUNTS)
    try:
        sink.open(SinkContext(load_preset("OS1-64")))
    except ConfigError as exc:
        pytest.skip(f"cannot serve the sensor's HTTP port here: {exc}")
    rx = {p: socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for p in ("lidar", "imu")}
    try:
        for s in rx.values():
            s.bind(("127.0.0.1", 0))
            s.settimeout(2.0)
        ports = {p: s.getsockname()[1] for p, s in rx.items()}
        assert _http(host, "/api/v1/sensor/metadata/sensor_info")[1]["status"] == "RUNNING"
        code, active = _http(host, "/api/v1/sensor/cmd/get_config_param?args=active")
        assert code == 200 and active["udp_dest"] == "" and active["udp_profile_lidar"] == "LEGACY"
        value = urllib.parse.quote(
            json.dumps({"udp_port_lidar": ports["lidar"], "udp_port_imu": ports["imu"]})
        )
        assert _http(host, f"/api/v1/sensor/cmd/set_config_param?args=.+{value}") == (200, "set_config_param")
        assert _http(host, "/api/v1/sensor/cmd/set_udp_dest_auto") == (200, {})
        bad = _http(host, "/api/v1/sensor/cmd/set_config_param?args=udp_port_imu+%7Bnot")
        assert bad[0] == 400 and "bad JSON" in bad[1]
        staged = _http(host, "/api/v1/sensor/cmd/get_config_param?args=staged")[1]
        assert staged["udp_dest"] == "127.0.0.1" and staged["udp_port_imu"] == ports["imu"]
        assert _http(host, "/api/v1/sensor/config")[1]["udp_dest"] == ""  # staged, not active
        assert _http(host, "/api/v1/sensor/cmd/reinitialize") == (200, {})
        code, _ = _http(
            host, "/api/v1/sensor/config?staging=true&reinit=true", {"udp_profile_lidar": "RNG15_RFL8_NIR8"}
        )
        assert code == 200
        meta = _http(host, "/api/v1/sensor/metadata")[1]
        assert meta["lidar_data_format"]["udp_profile_lidar"] == "RNG15_RFL8_NIR8"
        assert meta["config_params"]["udp_dest"] == "127.0.0.1"
        code, err = _http(host, "/api/v1/sensor/config?staging=true&reinit=true", {"lidar_mode": "2048x10"})
        assert code == 400 and "config_params.lidar_mode" in err and "2048x10" in err
        _http(host, "/api/v1/sensor/config?staging=true&reinit=false", {"lidar_mode": "1024x10"})

        scans = _accelerating_turning_scans(6)
        for s in scans:
            sink.write(s)
        lidar = [rx["lidar"].recv(65535) for _ in range(10)]
        assert {len(p) for p in lidar} == {32 + 16 * (12 + 64 * 4) + 32}  # RNG15: 4 bytes a pixel
        imu = []
        while len(imu) < 50:
            imu.append(rx["imu"].recv(65535))
    finally:
        sink.close()
        for s in rx.values():
            s.close()
    assert {len(p) for p in imu} == {48}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    np.save(tmp_path / "imu.npy", np.array([np.frombuffer(p, np.uint8) for p in imu]))
    (tmp_path / "imu.py").write_text(IMU)
    args = [str(PEER), str(tmp_path / "imu.py"), str(tmp_path / "meta.json"), str(tmp_path / "imu.npy")]
    subprocess.run([*args, str(tmp_path / "dec.npz")], check=True, timeout=60, capture_output=True)
    with np.load(tmp_path / "dec.npz") as z:
        t, v = z["ts"] - z["ts"][0], z["vals"]
    assert np.all(np.diff(t) == 10_000_000)  # 100 Hz
    late = t >= 2 * PERIOD  # after two scans there is an acceleration to read
    yaw = np.radians(30.0) * (t[late] // PERIOD * PERIOD) * 1e-9  # a scan's samples: its start pose
    # 2 m/s^2 along world x, seen from a sensor yawed by `yaw`: (2 cos yaw, -2 sin yaw) m/s^2, in g
    np.testing.assert_allclose(v[late, 0], 2.0 * np.cos(yaw) / 9.80665, atol=1e-4)
    np.testing.assert_allclose(v[late, 1], -2.0 * np.sin(yaw) / 9.80665, atol=1e-4)
    np.testing.assert_allclose(v[:, 2], 1.0, atol=1e-6)  # 1 g up
    np.testing.assert_allclose(v[t >= PERIOD, 5], 30.0, atol=1e-3)  # deg/s about z
    np.testing.assert_allclose(v[:, 3:5], 0.0, atol=1e-6)


def test_legacy_tcp_api_of_firmware_2(tmp_path):
    """A firmware 2.5 file: the TCP API on 7501 answers, configures and reinitialises (RNG15 packets
    arrive where it sent them); a firmware 3.x sensor has no TCP port."""
    from rt_lidar.sinks.ouster_meta import read_metadata

    host = "127.0.0.9"
    given = read_metadata(DATA / "os1-64_fw2.5.0_rng15_flat.json")
    sink = OusterSensorSink(host, given, None, "fw2.5")
    try:
        sink.open(SinkContext(load_preset("OS1-64")))
    except ConfigError as exc:
        pytest.skip(f"cannot serve the sensor's ports here: {exc}")
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.bind(("127.0.0.1", 0))
        rx.settimeout(2.0)
        with socket.create_connection((host, 7501), timeout=5) as tcp:
            f = tcp.makefile("rw")

            def ask(line: str) -> str:
                f.write(line + "\n")
                f.flush()
                return f.readline().rstrip("\n")

            info = json.loads(ask("get_sensor_info"))
            assert (info["prod_sn"], info["build_rev"]) == ("992146000761", "v2.5.0")
            fmt = json.loads(ask("get_lidar_data_format"))
            assert fmt["udp_profile_lidar"] == "RNG15_RFL8_NIR8" and fmt["columns_per_frame"] == 1024
            assert len(json.loads(ask("get_beam_intrinsics"))["beam_altitude_angles"]) == 64
            assert json.loads(ask("get_config_param active lidar_mode")) == "1024x10"
            assert ask("set_config_param udp_port_lidar " + str(rx.getsockname()[1])) == "set_config_param"
            assert ask("set_udp_dest_auto") == "set_udp_dest_auto"
            assert json.loads(ask("get_config_param staged udp_dest")) == "127.0.0.1"
            assert json.loads(ask("get_config_param active"))["udp_dest"] == ""
            assert ask("set_config_param lidar_mode 2048x10") == "set_config_param"
            bad = ask("reinitialize")
            assert bad.startswith("error: fw2.5 (reinitialize): field 'config_params.lidar_mode': 2048x10")
            assert ask("set_config_param lidar_mode 1024x10") == "set_config_param"
            assert ask("reinitialize") == "reinitialize"
            assert json.loads(ask("get_config_param active udp_dest")) == "127.0.0.1"
            assert json.loads(ask("get_sensor_info"))["initialization_id"] == 7340033 + 1
            assert ask("get_alerts_of_the_future").startswith("error: invalid command")
        sink.write(_accelerating_turning_scans(1)[0])
        got = rx.recv(65535)
        assert len(got) == 32 + 16 * (12 + 64 * 4) + 32
        assert int.from_bytes(got[4:7], "little") == 7340033 + 1  # the file's, one reinitialisation on
    finally:
        sink.close()
        rx.close()
    fw3 = OusterSensorSink("127.0.0.10", None, None, "fw3")
    fw3.open(SinkContext(load_preset("OS1-64")))
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.10", 7501), timeout=2).close()
    finally:
        fw3.close()
