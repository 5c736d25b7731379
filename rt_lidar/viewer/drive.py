"""Live driving from the viewer's keyboard: keys -> car controls -> a :class:`CarControlSink`.

W / Up: throttle, S / Down: reverse throttle, A / Left and D / Right: steer (ramped, recentring when
released), X: brake. The sink is the AirSim bridge (:class:`AirSimControlSink`, ``setCarControls`` on
the server the viewer watches, embedded or Unreal) or a local :class:`~rt_lidar.server.vehicle.BicycleModel`.
No Qt here: the window feeds key names in.
"""

from __future__ import annotations

import importlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from rt_lidar.errors import ConfigError
from rt_lidar.server.vehicle import BicycleModel, VehicleControls

__all__ = [
    "DRIVE_KEYS",
    "AirSimControlSink",
    "BicycleControlSink",
    "CarControlSink",
    "DriveCommand",
    "KeyboardDriver",
    "parse_host_port",
]

DRIVE_KEYS: dict[str, str] = {
    "w": "forward",
    "up": "forward",
    "s": "reverse",
    "down": "reverse",
    "a": "left",
    "left": "left",
    "d": "right",
    "right": "right",
    "x": "brake",
}
"""Key name (lower case, Qt's name without ``Key_``) -> action."""


class CarControlSink(Protocol):
    """Where the driver's controls go."""

    def set_controls(self, throttle: float, steering: float, brake: float) -> None:
        """Apply controls (AirSim conventions: steering positive = right)."""
        ...

    @property
    def status(self) -> str:
        """Where the controls go and whether they get there (for the HUD)."""
        ...


@dataclass(frozen=True)
class DriveCommand:
    """Controls as sent."""

    throttle: float = 0.0
    steering: float = 0.0
    brake: float = 0.0


class KeyboardDriver:
    """Turns held keys into controls; :meth:`tick` sends them when they change (and every
    ``keepalive_s`` regardless, so a server that missed one catches up)."""

    def __init__(
        self, sink: CarControlSink, steer_rate: float = 3.0, throttle: float = 1.0, keepalive_s: float = 0.5
    ) -> None:
        self.sink = sink
        self.steer_rate = steer_rate
        self.throttle = throttle
        self.keepalive_s = keepalive_s
        self.held: set[str] = set()
        self.steering = 0.0
        self.last_sent: DriveCommand | None = None
        self._last_send_t = 0.0
        self._last_tick_t: float | None = None
        self.sent = 0

    def handles(self, key: str) -> bool:
        """Is ``key`` a driving key?"""
        return key.lower() in DRIVE_KEYS

    def press(self, key: str) -> None:
        """A driving key went down."""
        if self.handles(key):
            self.held.add(DRIVE_KEYS[key.lower()])

    def release(self, key: str) -> None:
        """A driving key came up."""
        if self.handles(key):
            self.held.discard(DRIVE_KEYS[key.lower()])

    def command(self, dt: float) -> DriveCommand:
        """The controls after ``dt`` seconds with the keys now held."""
        target = (1.0 if "right" in self.held else 0.0) - (1.0 if "left" in self.held else 0.0)
        step = self.steer_rate * dt
        self.steering += max(-step, min(step, target - self.steering))
        throttle = (self.throttle if "forward" in self.held else 0.0) - (
            self.throttle if "reverse" in self.held else 0.0
        )
        return DriveCommand(throttle, round(self.steering, 4), 1.0 if "brake" in self.held else 0.0)

    def tick(self, now: float | None = None) -> DriveCommand:
        """Compute the controls and send them if they changed; returns them."""
        now = time.monotonic() if now is None else now
        dt = 0.0 if self._last_tick_t is None else min(now - self._last_tick_t, 0.2)
        self._last_tick_t = now
        cmd = self.command(dt)
        if cmd != self.last_sent or now - self._last_send_t >= self.keepalive_s:
            self.sink.set_controls(cmd.throttle, cmd.steering, cmd.brake)
            self.last_sent, self._last_send_t = cmd, now
            self.sent += 1
        return cmd


class BicycleControlSink:
    """Drives a local :class:`BicycleModel` (the embedded world's ego, or a test's)."""

    def __init__(self, model: BicycleModel) -> None:
        self.model = model
        self.status = "local vehicle model"

    def set_controls(self, throttle: float, steering: float, brake: float) -> None:
        """Hold these controls on the model."""
        self.model.set_controls(VehicleControls(throttle, steering, brake))


def parse_host_port(spec: str, default_port: int = 41451) -> tuple[str, int]:
    """``"HOST:PORT"`` / ``"HOST"`` / ``":PORT"`` -> (host, port)."""
    host, sep, port = spec.rpartition(":")
    if not sep:
        return spec or "127.0.0.1", default_port
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise ConfigError(f"--airsim '{spec}': expected HOST:PORT") from None


class AirSimControlSink:
    """``setCarControls`` over the AirSim bridge (``rt_lidar.unreal_bridge.client.AirSimClient``, imported
    lazily, so the viewer runs without the bridge when it does not drive).

    The calls go out from a sender thread of its own: the viewer's GUI thread only hands over the newest
    controls and never waits on the network. A server that is not up yet, goes away or restarts is
    tried again every ``retry_s`` (API control is enabled anew on each connection), and :attr:`status`
    says where the link stands, for the HUD.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 41451,
        vehicle_name: str = "",
        *,
        retry_s: float = 1.0,
        timeout_s: float = 2.0,
    ) -> None:
        client_mod = importlib.import_module("rt_lidar.unreal_bridge.client")
        wire = importlib.import_module("rt_lidar.unreal_bridge.wire")
        bridge_error = importlib.import_module("rt_lidar.unreal_bridge.errors").BridgeError
        self._errors: tuple[type[BaseException], ...] = (bridge_error, OSError)
        self._controls_type: Any = wire.CarControls
        self.client: Any = client_mod.AirSimClient(host, port, timeout=timeout_s)
        self.address = f"{host}:{port}"
        self.vehicle_name = vehicle_name
        self.retry_s = retry_s
        self.sent = 0
        """Controls the server took."""
        self.connections = 0
        """Connections on which API control was enabled."""
        self.error: str | None = None
        """Why the last call failed (None once a call went through)."""
        self._pending: DriveCommand | None = None
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="rt-lidar-drive", daemon=True)
        self._thread.start()

    @property
    def status(self) -> str:
        """``connected to HOST:PORT``, or why not and that it keeps trying."""
        if self.error is not None:
            return f"no link to {self.address} ({self.error}); retrying every {self.retry_s:g} s"
        if self.connections == 0:
            return f"connecting to {self.address}"
        return f"connected to {self.address}"

    def set_controls(self, throttle: float, steering: float, brake: float) -> None:
        """Queue these controls; the sender thread sends the newest (earlier unsent ones are dropped)."""
        with self._cond:
            self._pending = DriveCommand(float(throttle), float(steering), float(brake))
            self._cond.notify()

    def _send(self, cmd: DriveCommand) -> None:
        if self.connections == 0 or self.error is not None:
            self.client.enable_api_control(True, self.vehicle_name)
            self.connections += 1
        controls = self._controls_type(throttle=cmd.throttle, steering=cmd.steering, brake=cmd.brake)
        self.client.set_car_controls(controls, self.vehicle_name)
        self.error = None
        self.sent += 1  # last: a reader that sees the count sees the cleared error too

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closing:
                    self._cond.wait()
                if self._pending is None:
                    return
                cmd, self._pending = self._pending, None
            try:
                self._send(cmd)
            except Exception as exc:  # any failure: say it and try again; the thread never dies
                known = isinstance(exc, self._errors)
                self.error = str(exc) if known else f"{type(exc).__name__}: {exc}"
                self.client.close()  # the next call connects anew
                retry_at = time.monotonic() + self.retry_s
                with self._cond:
                    if self._pending is None:
                        self._pending = cmd  # resent once the server is back
                    # new controls only replace the pending ones: the next try waits for its time
                    while not self._closing and (left := retry_at - time.monotonic()) > 0:
                        self._cond.wait(left)
                    if self._closing:
                        return

    def pose(self) -> Any:
        """The car's pose (``simGetVehiclePose``), for the HUD."""
        return self.client.sim_get_vehicle_pose(self.vehicle_name)

    def close(self) -> None:
        """Brake (sent if the link is up), stop the sender thread and close the connection."""
        self.set_controls(0.0, 0.0, 1.0)
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout=self.retry_s + 5.0)
        self.client.close()
