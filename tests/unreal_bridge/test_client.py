"""AirSimClient against AirSimServer over loopback: every call, in the project frame, both ways."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
from backend_fixture import LIDAR_POSE, PlaneBackend

from rt_lidar.unreal_bridge import AirSimClient, AirSimServer, FluPose
from rt_lidar.unreal_bridge.errors import RpcError
from rt_lidar.unreal_bridge.rpc import RpcServer
from rt_lidar.unreal_bridge.wire import CarControls, ImageRequest


@pytest.fixture
def backend() -> PlaneBackend:
    return PlaneBackend(n_points=20_000)


@pytest.fixture
def client(backend: PlaneBackend) -> Iterator[AirSimClient]:
    with AirSimServer(backend, port=0) as server:
        server.start()
        assert server.host == "127.0.0.1"
        with AirSimClient(port=server.port, timeout=10) as c:
            yield c


def test_connection_calls(client: AirSimClient) -> None:
    assert client.ping() is True
    assert client.get_server_version() == 4
    assert client.get_min_required_client_version() == 1
    assert client.confirm_connection() == 4


def test_lidar_data_in_project_frame(client: AirSimClient, backend: PlaneBackend) -> None:
    frame = client.get_lidar_data()
    assert frame.points.dtype == np.float32 and frame.points.shape == (20_000, 3)
    np.testing.assert_array_equal(frame.points, backend.points)  # NED on the wire, FLU at both ends
    assert frame.segmentation.dtype == np.int32
    np.testing.assert_array_equal(frame.segmentation, backend.segmentation)
    assert frame.time_stamp == backend.sim_time_ns
    assert frame.pose.position == pytest.approx(LIDAR_POSE.position)
    assert frame.pose.orientation == pytest.approx(LIDAR_POSE.orientation, abs=1e-7)
    with pytest.raises(RpcError, match="No lidar with name Nope exist on vehicle"):
        client.get_lidar_data("Nope")


def test_raw_lidar_answer_is_ned_float32(client: AirSimClient, backend: PlaneBackend) -> None:
    raw = client.call("getLidarData", "", "")
    assert set(raw) == {"time_stamp", "point_cloud", "pose", "segmentation"}
    cloud = np.asarray(raw["point_cloud"], dtype=np.float32).reshape(-1, 3)
    np.testing.assert_array_equal(cloud, backend.points * np.float32([1, -1, -1]))
    assert raw["pose"]["position"]["z_val"] == pytest.approx(-1.5)


def test_extension_hits(client: AirSimClient, backend: PlaneBackend) -> None:
    hits = client.rt_lidar_get_hits()
    expected = backend.lidar_hits("", "")
    for name in ("points", "normals", "segmentation", "ring", "time", "miss"):
        got, want = getattr(hits, name), getattr(expected, name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    np.testing.assert_array_equal(hits.range, expected.range)  # NaN for misses on both sides
    assert hits.time_stamp == backend.sim_time_ns and hits.pose.position == pytest.approx(LIDAR_POSE.position)


def test_images(client: AirSimClient) -> None:
    png, depth = client.sim_get_images(
        [ImageRequest("front", 0), ImageRequest("front", 1, pixels_as_float=True)]
    )
    assert png.data_uint8.startswith(b"\x89PNG") and (png.width, png.height) == (8, 6)
    assert png.camera_pose.position == pytest.approx(LIDAR_POSE.position)
    assert depth.data_float.dtype == np.float32 and depth.data_float[3] == 1.5 and depth.pixels_as_float
    image = client.sim_get_image("front", 0)
    assert image is not None and image.startswith(b"\x89PNG")


def test_poses_and_objects(client: AirSimClient, backend: PlaneBackend) -> None:
    assert client.sim_get_vehicle_pose() == backend.vehicle
    target = FluPose((1.0, 2.0, 3.0), (math.sqrt(0.5), 0.0, 0.0, math.sqrt(0.5)))
    client.sim_set_vehicle_pose(target, True)
    assert backend.vehicle.position == target.position
    assert backend.vehicle.orientation == pytest.approx(target.orientation)
    assert client.sim_get_object_pose("Car_2").position == (10.0, 1.0, 2.0)
    assert all(math.isnan(v) for v in client.sim_get_object_pose("Nothing").position)
    assert client.sim_list_scene_objects("Car.*") == ["Car_2"]
    assert sorted(client.sim_list_scene_objects()) == ["Car_2", "Road_1", "Tree_3"]
    assert client.sim_get_segmentation_object_id("Tree_3") == 200
    assert client.sim_set_segmentation_object_id("Tr.*", 42, True) is True
    assert client.sim_get_segmentation_object_id("Tree_3") == 42
    assert client.sim_set_segmentation_object_id("Nothing", 1) is False
    with pytest.raises(RpcError, match="threw an exception"):
        client.sim_list_scene_objects("([")


def test_time_control(client: AirSimClient, backend: PlaneBackend) -> None:
    client.sim_pause(True)
    assert client.sim_is_paused() is True
    client.sim_pause(False)
    assert client.sim_is_paused() is False
    t0 = backend.sim_time_ns
    client.sim_continue_for_time(0.05)
    client.sim_continue_for_frames(3)
    assert backend.sim_time_ns == t0 + 50_000_000 + 3 * backend.frame_ns
    assert client.sim_is_paused() is True


def test_car_settings_weather(client: AirSimClient, backend: PlaneBackend) -> None:
    state = client.get_car_state()
    assert state.speed == pytest.approx(5.1) and state.gear == 2
    assert state.kinematics.linear_velocity == (5.0, 1.0, 0.0)
    assert state.kinematics.pose.position == backend.vehicle.position
    client.set_car_controls(CarControls(throttle=0.5, steering=-0.25, handbrake=True))
    assert backend.controls == CarControls(throttle=0.5, steering=-0.25, handbrake=True)
    client.enable_api_control(True)
    assert client.is_api_control_enabled() is True
    client.reset()
    assert backend.resets == 1
    assert "SettingsVersion" in client.get_settings_string()
    assert client.list_vehicles() == ["Car1"]
    client.sim_enable_weather(True)
    client.sim_set_weather_parameter(0, 0.75)
    assert backend.weather_enabled and backend.weather == {0: 0.75}


def test_cosys_argument_forms_are_found_and_remembered() -> None:
    server = RpcServer(port=0)
    calls: list[int] = []
    server.register("simGetImages", lambda reqs, vehicle: calls.append(2) or [])  # Cosys binds 2 args
    server.start()
    try:
        with AirSimClient(port=server.port) as c:
            assert c.sim_get_images([ImageRequest("0", 0)]) == []
            assert c.sim_get_images([ImageRequest("0", 0)]) == []
        assert calls == [2, 2]
    finally:
        server.close()
