"""The real stock ``airsim`` 1.8.1 and ``cosysairsim`` clients, run in their own venv, against our server.

The peer venv is made by ``tools/setup_airsim_peer.sh`` (default ``.venv-airsim``; override with
``RT_LIDAR_AIRSIM_PEER=DIR``). Without it these tests skip and say how to make it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from backend_fixture import LIDAR_POSE, PlaneBackend
from peers import run_peer_json

from rt_lidar.unreal_bridge import AirSimServer

N_POINTS = 20_000

# Run by the peer venv's python: argv = module name, port. Prints one JSON line of what it saw.
PEER_SCRIPT = r"""
import json, sys, contextlib, io
mod = __import__(sys.argv[1])
c = mod.CarClient(port=int(sys.argv[2]), timeout_value=20)
out = {}
with contextlib.redirect_stdout(io.StringIO()) as printed:
    c.confirmConnection()
out["confirm"] = printed.getvalue()
lidar = c.getLidarData()
out["n_cloud"] = len(lidar.point_cloud)
out["first_point"] = list(lidar.point_cloud[:3])
out["n_seg"] = len(getattr(lidar, "segmentation", []) or [])
out["lidar_pose"] = [lidar.pose.position.x_val, lidar.pose.position.y_val, lidar.pose.position.z_val]
out["time_stamp"] = lidar.time_stamp
T = mod.ImageType
reqs = [mod.ImageRequest("front", T.Scene), mod.ImageRequest("front", T.DepthPlanar, True, False)]
imgs = c.simGetImages(reqs)
out["images"] = [[r.width, r.height, bytes(r.image_data_uint8[:4]).hex(), len(r.image_data_float)]
                 for r in imgs]
pose = c.simGetVehiclePose()
out["vehicle_pose"] = [pose.position.x_val, pose.position.y_val, pose.position.z_val]
state = c.getCarState()
out["car"] = [state.speed, state.gear, state.kinematics_estimated.linear_velocity.y_val]
c.setCarControls(mod.CarControls(throttle=0.5, steering=0.1))
c.simPause(True)
out["paused"] = (getattr(c, "simIsPaused", None) or c.simIsPause)()  # 1.8.1 names it simIsPause
c.simContinueForTime(0.05)
out["objects"] = c.simListSceneObjects("Car.*")
out["seg_id"] = c.simGetSegmentationObjectID("Tree_3")
c.enableApiControl(True)
out["api"] = c.isApiControlEnabled()
out["home"] = c.getHomeGeoPoint().latitude
obj = c.simGetObjectPose("Car_2")
out["object_pose"] = [obj.position.x_val, obj.position.y_val, obj.position.z_val]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def backend_and_port() -> Iterator[tuple[PlaneBackend, int]]:
    backend = PlaneBackend(n_points=N_POINTS)
    with AirSimServer(backend, port=0) as server:
        server.start()
        yield backend, server.port


def run_peer(module: str, port: int) -> dict:
    return run_peer_json("airsim", ["-c", PEER_SCRIPT, module, str(port)])


@pytest.mark.parametrize("module", ["airsim", "cosysairsim"])
def test_stock_client_against_our_server(module: str, backend_and_port: tuple[PlaneBackend, int]) -> None:
    backend, port = backend_and_port
    t_before = backend.sim_time_ns
    seen = run_peer(module, port)
    assert "Connected!" in seen["confirm"] and "not supported" not in seen["confirm"]
    assert seen["n_cloud"] == 3 * N_POINTS and seen["n_seg"] == N_POINTS
    ned = backend.points[0] * np.float32([1, -1, -1])
    assert seen["first_point"] == pytest.approx(ned.tolist())
    assert seen["lidar_pose"] == pytest.approx([LIDAR_POSE.position[0], -LIDAR_POSE.position[1], -1.5])
    assert seen["time_stamp"] == t_before
    assert backend.sim_time_ns == t_before + 50_000_000  # simContinueForTime(0.05) sent as float64
    assert seen["images"] == [[8, 6, "89504e47", 0], [8, 6, "", 48]]
    assert seen["vehicle_pose"] == pytest.approx([3.0, 4.0, -0.5])
    assert seen["car"] == pytest.approx([5.1, 2, -1.0])
    assert seen["paused"] is True
    assert seen["objects"] == ["Car_2"] and seen["seg_id"] == 200 and seen["api"] is True
    assert seen["home"] == pytest.approx(47.641468)
    assert seen["object_pose"] == pytest.approx([10.0, -1.0, -2.0])
    assert backend.controls.throttle == 0.5
