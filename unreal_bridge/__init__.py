"""Both ends of the AirSim bridge: msgpack-RPC, wire types, client, and the embedded world server.

- :mod:`~rt_lidar.unreal_bridge.rpc`: rpclib's msgpack-RPC (client and threaded server) on msgpack 1.x;
- :mod:`~rt_lidar.unreal_bridge.wire`: AirSim's wire structs and the NED <-> project-frame conversion;
- :mod:`~rt_lidar.unreal_bridge.fast_decode`: numeric msgpack arrays straight to and from NumPy;
- :mod:`~rt_lidar.unreal_bridge.client`: :class:`AirSimClient`, the fast client;
- :mod:`~rt_lidar.unreal_bridge.server`: :class:`AirSimServer`, AirSim's API over a :class:`SimBackend`;
- ``rt_lidar.unreal_bridge.world``: the embedded world (imported on its own, not from here).
"""

from .client import AirSimClient
from .errors import (
    BackendError,
    BridgeError,
    ConnectionLost,
    MessageTooLarge,
    ProtocolError,
    RpcError,
    RpcTimeout,
    WireFormatError,
)
from .rpc import RpcClient, RpcServer
from .server import AirSimServer, BeamSimBackend, SimBackend
from .wire import (
    CarControls,
    CarState,
    FluCarState,
    FluImage,
    FluKinematics,
    FluPose,
    ImageRequest,
    ImageResponse,
    LidarFrame,
    LidarHits,
    Pose,
)

__all__ = [
    "AirSimClient",
    "AirSimServer",
    "BackendError",
    "BeamSimBackend",
    "BridgeError",
    "CarControls",
    "CarState",
    "ConnectionLost",
    "FluCarState",
    "FluImage",
    "FluKinematics",
    "FluPose",
    "ImageRequest",
    "ImageResponse",
    "LidarFrame",
    "LidarHits",
    "MessageTooLarge",
    "Pose",
    "ProtocolError",
    "RpcClient",
    "RpcError",
    "RpcServer",
    "RpcTimeout",
    "SimBackend",
    "WireFormatError",
]
