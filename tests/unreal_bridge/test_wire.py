"""AirSim wire structs keep AirSim's field names; NED <-> project frame is pinned by hand values."""

from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest

from rt_lidar.unreal_bridge import rpc, wire
from rt_lidar.unreal_bridge.errors import WireFormatError

S = math.sqrt(0.5)


def test_field_names_are_airsims() -> None:
    assert list(wire.Vector3r().to_msgpack()) == ["x_val", "y_val", "z_val"]
    assert list(wire.Quaternionr().to_msgpack()) == ["w_val", "x_val", "y_val", "z_val"]
    assert list(wire.Pose().to_msgpack()) == ["position", "orientation"]
    assert set(wire.LidarData().to_msgpack()) == {"point_cloud", "time_stamp", "pose", "segmentation"}
    assert list(wire.ImageRequest().to_msgpack()) == [
        "camera_name",
        "image_type",
        "pixels_as_float",
        "compress",
    ]
    assert "annotation_name" in wire.ImageRequest(annotation_name="a").to_msgpack()
    assert set(wire.ImageResponse().to_msgpack()) >= {
        "image_data_uint8",
        "image_data_float",
        "camera_position",
        "camera_orientation",
        "time_stamp",
        "message",
        "pixels_as_float",
        "compress",
        "width",
        "height",
        "image_type",
        "camera_name",
    }
    assert list(wire.CarControls().to_msgpack()) == [
        "throttle",
        "steering",
        "brake",
        "handbrake",
        "is_manual_gear",
        "manual_gear",
        "gear_immediate",
    ]
    assert set(wire.CarState().to_msgpack()) == {
        "speed",
        "gear",
        "rpm",
        "maxrpm",
        "handbrake",
        "collision",
        "kinematics_estimated",
        "timestamp",
    }
    assert set(wire.KinematicsState().to_msgpack()) == {
        "position",
        "orientation",
        "linear_velocity",
        "angular_velocity",
        "linear_acceleration",
        "angular_acceleration",
    }


def test_round_trip_through_msgpack_bytes() -> None:
    state = wire.CarState(
        speed=3.5,
        gear=2,
        kinematics_estimated=wire.KinematicsState(
            position=wire.Vector3r(1.0, 2.0, -3.0), orientation=wire.Quaternionr(S, 0.0, 0.0, S)
        ),
    )
    back = wire.CarState.from_msgpack(msgpack.unpackb(rpc.pack(state.to_msgpack())))
    assert back.kinematics_estimated.position == wire.Vector3r(1.0, 2.0, -3.0)
    assert back.speed == 3.5 and back.gear == 2
    assert math.isclose(back.kinematics_estimated.orientation.w_val, S, rel_tol=1e-7)  # float32 on the wire
    lidar = wire.LidarData(5, np.arange(6, dtype=np.float32), wire.Pose(), np.array([1, 2], np.int32))
    raw = msgpack.unpackb(rpc.pack(lidar.to_msgpack()))
    assert raw["point_cloud"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and raw["segmentation"] == [1, 2]
    back_l = wire.LidarData.from_msgpack(raw)
    np.testing.assert_array_equal(back_l.point_cloud, lidar.point_cloud)
    resp = wire.ImageResponse(image_data_uint8=b"\x89PNG", width=4)
    assert (
        wire.ImageResponse.from_msgpack(msgpack.unpackb(rpc.pack(resp.to_msgpack()))).image_data_uint8
        == b"\x89PNG"
    )


def test_unknown_fields_ignored_missing_defaulted_bad_refused() -> None:
    assert wire.Vector3r.from_msgpack({"x_val": 1, "w": 3}) == wire.Vector3r(1.0, 0.0, 0.0)
    with pytest.raises(WireFormatError):
        wire.Pose.from_msgpack([1, 2])
    with pytest.raises(WireFormatError):
        wire.Vector3r.from_msgpack({"x_val": "north"})


def test_points_ned_to_flu_by_hand() -> None:
    ned = np.array([[1.0, 2.0, 3.0], [-4.0, 0.5, -6.0]], dtype=np.float32)
    flu = wire.ned_to_flu_points(ned)
    np.testing.assert_array_equal(flu, [[1.0, -2.0, -3.0], [-4.0, -0.5, 6.0]])
    np.testing.assert_array_equal(wire.flu_to_ned_points(flu), ned)
    np.testing.assert_array_equal(wire.ned_to_flu_points(ned.ravel()), flu)  # AirSim's flat layout
    assert flu.dtype == np.float32
    with pytest.raises(WireFormatError):
        wire.ned_to_flu_points(np.zeros(4))


def test_rotation_ned_to_flu_by_hand() -> None:
    # NED yaw +90 deg turns from north to east (to the right); in FLU that is yaw -90 deg.
    q_ned = wire.Quaternionr(S, 0.0, 0.0, S)
    q_flu = wire.ned_to_flu_quaternion(q_ned)
    assert q_flu == pytest.approx((S, 0.0, 0.0, -S))
    assert wire.flu_to_ned_quaternion(q_flu) == q_ned
    # a nose-up pitch of 30 deg: NED +y is right, pitch up is +30 about y; FLU +y is left, so -30 about y
    half = math.radians(30) / 2
    assert wire.ned_to_flu_quaternion((math.cos(half), 0, math.sin(half), 0)) == pytest.approx(
        (math.cos(half), 0, -math.sin(half), 0)
    )


def test_pose_conversion_moves_a_point_the_same_way_in_both_frames() -> None:
    # vehicle 10 m north, 5 m east, 2 m up (z = -2 in NED), yawed 90 deg right (facing east)
    pose_ned = wire.Pose(wire.Vector3r(10.0, 5.0, -2.0), wire.Quaternionr(S, 0.0, 0.0, S))
    pose_flu = wire.pose_ned_to_flu(pose_ned)
    assert pose_flu.position == (10.0, -5.0, 2.0)
    # a point 1 m ahead of the vehicle is 1 m further east: NED (10, 6, -2), FLU (10, -6, 2)
    ahead = pose_flu.matrix() @ np.array([1.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(ahead[:3], [10.0, -6.0, 2.0], atol=1e-12)
    assert wire.pose_flu_to_ned(pose_flu) == pose_ned


def test_kinematics_and_car_state_convert_each_vector() -> None:
    k = wire.KinematicsState(
        linear_velocity=wire.Vector3r(1.0, 2.0, 3.0), angular_velocity=wire.Vector3r(0, 0, 0.5)
    )
    flu = wire.kinematics_ned_to_flu(k)
    assert flu.linear_velocity == (1.0, -2.0, -3.0) and flu.angular_velocity == (0.0, -0.0, -0.5)
    assert wire.kinematics_flu_to_ned(flu) == k
    s = wire.CarState(speed=2.0, kinematics_estimated=k, timestamp=9)
    assert wire.car_state_flu_to_ned(wire.car_state_ned_to_flu(s)).kinematics_estimated == k
