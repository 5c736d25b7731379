"""An emulated Ouster sensor: ``--sink ouster-sensor:ADDRESS[,metadata=real.json][,profile=RNG19]``.

It answers the sensor's HTTP API on ``ADDRESS`` port 80 (a loopback address such as 127.0.0.2: all of
127/8 reaches the host) with what ouster-sdk's client asks:
- ``GET /api/v1/sensor/metadata`` and ``.../metadata/<section>`` (``sensor_info``, ``beam_intrinsics``,
  ``lidar_data_format``, ...), ``GET /api/v1/system/firmware``, ``GET /api/v1/user/data``;
- configuration, firmware 3.1+ style: ``GET /api/v1/sensor/config[?staging=true]``, ``POST
  /api/v1/sensor/config?staging=true&reinit=BOOL`` (a ``udp_dest`` of ``@auto`` becomes the caller's
  address; ``reinit=true`` makes the staged configuration active);
- and firmware 2.4-3.0 style: ``GET /api/v1/sensor/cmd/get_config_param?args=active|staged``,
  ``set_config_param?args=KEY+VALUE`` (``.`` for the whole JSON), ``set_udp_dest_auto``,
  ``reinitialize``, ``save_config_params``.
Which style a client uses follows the firmware in the metadata's ``image_rev`` (ours: 3.1.0). Before
firmware 3.0 the legacy TCP API also answers on port 7501: one command a line (``get_sensor_info``,
``get_beam_intrinsics``, ``get_lidar_data_format``, ..., ``get_config_param active|staged [KEY]``,
``set_config_param KEY VALUE``, ``set_udp_dest_auto``, ``reinitialize``), one reply a line (JSON, or
the command's name for the setters).

Lidar packets (the metadata's profile, :mod:`rt_lidar.sinks.ouster`) go to ``udp_dest:udp_port_lidar``
and LEGACY IMU packets (48 bytes: three u64 timestamps, acceleration in g and angular velocity in
deg/s as float32 x/y/z) to ``udp_port_imu`` at 100 Hz, from ``ADDRESS``, at wall-clock pace, while
``operating_mode`` is NORMAL and a ``udp_dest`` is set. The IMU reads the sensor's motion between
scans: the acceleration of its path plus 1 g up, the turn rate of its orientation, in the sensor frame.
A reinitialisation to another ``udp_profile_lidar`` or ``columns_per_packet`` switches the packets; a
lidar mode the preset cannot fire is refused (HTTP 400 naming the field).
"""

from __future__ import annotations

import copy
import json
import re
import socket
import socketserver
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rt_lidar.errors import ConfigError, FieldError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink
from rt_lidar.sinks.ouster import OusterPacketizer
from rt_lidar.sinks.ouster_meta import complete_metadata, read_metadata
from rt_lidar.sinks.pacing import Pacer, PacingStats
from rt_lidar.sinks.pcap import ipv4_bytes

__all__ = ["OusterSensorSink", "ouster_sensor_sink"]

FIRMWARE = "ousteros-image-prod-aries-v3.1.0+rt-lidar"
TCP_PORT = 7501
_CONFIG_DEFAULTS: dict[str, Any] = {
    "azimuth_window": [0, 360000],
    "multipurpose_io_mode": "OFF",
    "nmea_baud_rate": "BAUD_9600",
    "nmea_ignore_valid_char": 0,
    "nmea_in_polarity": "ACTIVE_HIGH",
    "nmea_leap_seconds": 0,
    "operating_mode": "NORMAL",
    "phase_lock_enable": False,
    "phase_lock_offset": 0,
    "signal_multiplier": 1,
    "sync_pulse_in_polarity": "ACTIVE_HIGH",
    "sync_pulse_out_angle": 360,
    "sync_pulse_out_frequency": 1,
    "sync_pulse_out_polarity": "ACTIVE_HIGH",
    "sync_pulse_out_pulse_width": 10,
    "timestamp_mode": "TIME_FROM_INTERNAL_OSC",
    "udp_dest": "",
}


class _SensorState:
    """The emulated sensor's configuration and metadata; the HTTP handlers and the sink share it."""

    def __init__(self, context: SinkContext, meta: dict[str, Any], source: str, address: str) -> None:
        self.lock = threading.Lock()
        self.address = address
        self.context, self.source = context, source
        self.meta = meta
        active = {**_CONFIG_DEFAULTS, **meta["config_params"]}
        self.active: dict[str, Any] = active
        self.staged: dict[str, Any] = copy.deepcopy(active)
        self.packetizer = OusterPacketizer(context.preset, meta)
        self.reinits = 0

    def metadata(self) -> dict[str, Any]:
        out = copy.deepcopy(self.meta)
        out["config_params"] = copy.deepcopy(self.active)
        return out

    def firmware(self) -> str:
        return str(self.meta["sensor_info"].get("image_rev") or FIRMWARE)

    def firmware_version(self) -> tuple[int, int, int]:
        """(major, minor, patch) of the firmware the metadata names."""
        m = re.search(r"v(\d+)\.(\d+)\.(\d+)", self.firmware())
        return (int(m[1]), int(m[2]), int(m[3])) if m else (3, 1, 0)

    def tcp_command(self, line: str, peer: str) -> str:
        """One command of the legacy TCP API (port 7501, firmware before 3.0): its reply line."""
        cmd, *args = line.split()
        sections = {
            "get_sensor_info": "sensor_info",
            "get_beam_intrinsics": "beam_intrinsics",
            "get_imu_intrinsics": "imu_intrinsics",
            "get_lidar_intrinsics": "lidar_intrinsics",
            "get_lidar_data_format": "lidar_data_format",
            "get_calibration_status": "calibration_status",
        }
        if cmd in sections:
            return json.dumps(self.metadata()[sections[cmd]])
        if cmd == "get_config_param" and args and args[0] in ("active", "staged"):
            cfg = self.active if args[0] == "active" else self.staged
            if len(args) == 1:
                return json.dumps(cfg)
            return json.dumps(cfg[args[1]]) if args[1] in cfg else f"error: unknown config param: {args[1]}"
        if cmd == "set_config_param" and len(args) >= 2:
            raw = line.split(None, 2)[2]
            try:
                value: Any = json.loads(raw)
            except json.JSONDecodeError:
                value = raw  # plain words: 1024x10, RNG19_RFL8_SIG16_NIR16, 192.168.1.1
            self.staged[args[0]] = value
            return "set_config_param"
        if cmd == "set_udp_dest_auto":
            self.staged["udp_dest"] = peer
            return "set_udp_dest_auto"
        if cmd == "reinitialize":
            try:
                self.reinitialize()
            except FieldError as exc:
                return f"error: {exc}"
            return "reinitialize"
        if cmd in ("save_config_params", "write_config_txt"):
            return cmd
        return f"error: invalid command: {cmd}"

    def reinitialize(self) -> None:
        """Make the staged configuration active, with a new ``initialization_id`` (a sensor takes a new
        one each time it initialises; its packets carry it) and the packet layout it names."""
        new = copy.deepcopy(self.staged)
        layout = ("lidar_mode", "udp_profile_lidar", "columns_per_packet", "udp_port_lidar", "udp_port_imu")
        given = {k: copy.deepcopy(v) for k, v in self.meta.items() if k != "lidar_data_format"}
        fmt = self.meta["lidar_data_format"]
        given["lidar_data_format"] = {k: fmt[k] for k in ("column_window", "pixel_shift_by_row")}
        given["config_params"] = {k: new[k] for k in layout if k in new}
        given["sensor_info"]["initialization_id"] = (int(given["sensor_info"]["initialization_id"]) + 1) % (
            1 << 24
        )
        meta = complete_metadata(self.context.preset, given, source=f"{self.source} (reinitialize)")
        old = self.packetizer
        self.packetizer = OusterPacketizer(self.context.preset, meta, old.epoch_ns)
        self.packetizer.motion = old.motion  # the IMU keeps the path it has seen
        self.meta = meta
        self.active = new
        self.reinits += 1


def _handler(state: _SensorState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, body: Any, code: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stage(self, changes: dict[str, Any]) -> None:
            for key, value in changes.items():
                state.staged[key] = self.client_address[0] if value == "@auto" else value

        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            path, query = url.path.rstrip("/"), urllib.parse.parse_qs(url.query)
            with state.lock:
                if path == "/api/v1/sensor/metadata":
                    return self._reply(state.metadata())
                if path.startswith("/api/v1/sensor/metadata/"):
                    section = state.metadata().get(path.rsplit("/", 1)[1])
                    return self._reply(section) if section is not None else self._reply("not found", 404)
                if path == "/api/v1/system/firmware":
                    return self._reply({"fw": state.firmware()})
                if path == "/api/v1/user/data":
                    return self._reply(str(state.meta.get("user_data", "")))
                if path == "/api/v1/system/network":
                    return self._reply({"ipv4": {"addr": f"{state.address}/8"}})
                if path == "/api/v1/sensor/config":
                    staged = query.get("staging", ["false"])[0].lower() == "true"
                    return self._reply(state.staged if staged else state.active)
                if path.startswith("/api/v1/sensor/cmd/"):
                    return self._command(path.rsplit("/", 1)[1], url.query)
            return self._reply("not found", 404)

        def _command(self, cmd: str, raw_query: str) -> None:
            args = raw_query.partition("args=")[2]
            if cmd == "get_config_param":
                return self._reply(state.staged if args == "staged" else state.active)
            if cmd == "set_config_param":
                key, _, value = args.partition("+")
                try:
                    parsed = json.loads(urllib.parse.unquote(value))
                except json.JSONDecodeError as exc:
                    return self._reply(f"set_config_param {key}: bad JSON value: {exc}", 400)
                if key == "." and not isinstance(parsed, dict):
                    return self._reply("set_config_param .: expected a JSON object", 400)
                self._stage(parsed if key == "." else {key: parsed})
                return self._reply("set_config_param")
            if cmd == "set_udp_dest_auto":
                self._stage({"udp_dest": "@auto"})
                return self._reply({})
            if cmd == "reinitialize":
                return self._reinitialize()
            if cmd == "save_config_params":
                return self._reply({})
            return self._reply(f"unknown command {cmd}", 404)

        def _reinitialize(self, body: Any = None) -> None:
            try:
                state.reinitialize()
            except FieldError as exc:
                return self._reply(str(exc), 400)
            return self._reply({} if body is None else body)

        def do_POST(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = {k.lower(): v[0].lower() for k, v in urllib.parse.parse_qs(url.query).items()}
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with state.lock:
                if url.path.rstrip("/") == "/api/v1/system/restart":
                    return self._reply({})
                if url.path.rstrip("/") != "/api/v1/sensor/config":
                    return self._reply("not found", 404)
                try:
                    changes = json.loads(raw) if raw.strip() else {}
                except json.JSONDecodeError as exc:
                    return self._reply(f"bad JSON: {exc}", 400)
                if not isinstance(changes, dict):
                    return self._reply("expected a JSON object", 400)
                self._stage(changes)
                if query.get("reinit", "false") == "true":
                    return self._reinitialize()
                return self._reply({})

    return Handler


def _tcp_handler(state: _SensorState) -> type[socketserver.StreamRequestHandler]:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for raw in self.rfile:
                line = raw.decode(errors="replace").strip()
                if not line:
                    continue
                with state.lock:
                    reply = state.tcp_command(line, self.client_address[0])
                self.wfile.write(reply.encode() + b"\n")

    return Handler


class _TcpServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


class OusterSensorSink:
    """The sink: HTTP API thread, a pacer sending lidar and IMU datagrams from the sensor's address."""

    def __init__(
        self,
        address: str,
        given: dict[str, Any] | None,
        profile: str | None,
        source: str,
        latency_ms: float = 100.0,
        late_ms: float = 50.0,
    ) -> None:
        ipv4_bytes(address)  # a plain IPv4 address (the client matches packets by their source)
        self.address, self.given, self.profile, self.source = address, given, profile, source
        self.http_port = 80
        self.latency_ns, self.late_ns = int(latency_ms * 1e6), int(late_ms * 1e6)
        self.state: _SensorState | None = None
        self._server: ThreadingHTTPServer | None = None
        self._tcp: _TcpServer | None = None
        self._sock: socket.socket | None = None
        self._pacer: Pacer | None = None
        self.sent = {"data": 0, "imu": 0}
        """Datagrams that left for a configured ``udp_dest`` (none before a client configures one)."""
        self.stats: PacingStats | None = None
        """The pacer's record after ``close``: sent, dropped late (a sim slower than real time), lateness."""

    def open(self, context: SinkContext) -> None:
        """Start answering HTTP on ``address:80`` and the datagram sender."""
        meta = complete_metadata(context.preset, self.given, self.profile, source=self.source)
        meta["sensor_info"].setdefault("image_rev", FIRMWARE)
        if not meta["sensor_info"]["image_rev"]:
            meta["sensor_info"]["image_rev"] = FIRMWARE
        self.state = _SensorState(context, meta, self.source, self.address)
        try:
            self._server = ThreadingHTTPServer((self.address, self.http_port), _handler(self.state))
        except OSError as exc:
            raise ConfigError(
                f"ouster-sensor: cannot serve HTTP on {self.address}:{self.http_port}: {exc}"
            ) from exc
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="ouster-sensor-http", daemon=True).start()
        if self.state.firmware_version() < (3, 0, 0):  # the TCP API went with firmware 3.0
            try:
                self._tcp = _TcpServer((self.address, TCP_PORT), _tcp_handler(self.state))
            except OSError as exc:
                self.close()
                raise ConfigError(
                    f"ouster-sensor: cannot serve TCP on {self.address}:{TCP_PORT}: {exc}"
                ) from exc
            threading.Thread(target=self._tcp.serve_forever, name="ouster-sensor-tcp", daemon=True).start()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        self._sock.bind((self.address, 0))
        self._pacer = Pacer(self._send, clock="wall", latency_ns=self.latency_ns, late_ns=self.late_ns)
        self._pacer.start()

    def _send(self, port: str, data: bytes) -> None:
        state, sock = self.state, self._sock
        assert state is not None and sock is not None
        cfg = state.active
        dest = str(cfg.get("udp_dest") or "")
        if not dest or cfg.get("operating_mode", "NORMAL") != "NORMAL":
            return
        key = "udp_port_lidar" if port == "data" else "udp_port_imu"
        try:
            sock.sendto(data, (dest, int(cfg[key])))
            self.sent[port] += 1
        except OSError:  # nobody listening: a sensor does not care
            pass

    def write(self, scan: Scan) -> None:
        """Packetize the scan (lidar + the IMU samples of its rotation) and queue it for its send times."""
        assert self.state is not None and self._pacer is not None, "open() first"
        with self.state.lock:
            pz = self.state.packetizer
        batches = pz.packetize(scan)
        self._pacer.put_many([(b.port, b.payloads, b.send_ns) for b in batches])

    def close(self) -> None:
        """Stop sending and serving."""
        if self._pacer is not None:
            self.stats = self._pacer.close(drain=False)
            self._pacer = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._tcp is not None:
            self._tcp.shutdown()
            self._tcp.server_close()
            self._tcp = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None


@register_sink("ouster-sensor")
def ouster_sensor_sink(target: str, options: dict[str, str]) -> OusterSensorSink:
    """``--sink ouster-sensor:127.0.0.2[,metadata=real.json][,profile=RNG19][,latency_ms=100][,late_ms=50]``:
    an emulated sensor. A scan's datagrams leave ``latency_ms`` after it is written, on the sensor's
    schedule; one more than ``late_ms`` behind it (a simulation slower than real time) is dropped."""
    opts = SinkOptions("ouster-sensor", options, {"metadata", "profile", "latency_ms", "late_ms"})
    try:
        ipv4_bytes(target or "127.0.0.2")
    except ValueError as exc:
        raise ConfigError(f"ouster-sensor:{target}: {exc}") from None
    source = options.get("metadata")
    given = read_metadata(source) if source else None
    pacing = {k: opts.number(k, 0.0, 0.0) for k in ("latency_ms", "late_ms") if k in options}  # ms
    return OusterSensorSink(
        target or "127.0.0.2", given, options.get("profile"), source or "metadata", **pacing
    )
