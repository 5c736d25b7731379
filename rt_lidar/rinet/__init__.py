"""RINet: learned raydrop and intensity from the camera (Data-driven Sensor Simulation for Realistic
LiDARs). Camera image -> intensity mask (per pixel the intensity of the nearest return, 0 where the ray
dropped); the scan's points the camera sees are dropped or given the learned intensity.

Inference (:mod:`.runtime`, :mod:`.stage`) needs only onnxruntime (or TensorRT + CuPy); training and
export (:mod:`.model`, :mod:`.train`, :mod:`.export`) need PyTorch and are not imported here.
"""

from rt_lidar.rinet.datasets import LidarCameraFrame, iter_frames, read_semantic_kitti
from rt_lidar.rinet.masks import LABEL_DROP, LABEL_NONE, LABEL_RETURN, IntensityMask, build_mask
from rt_lidar.rinet.runtime import available_runtimes, bundled_model_path, load_runtime
from rt_lidar.rinet.stage import RinetStage, camera_projection, rgb_from_airsim

__all__ = [
    "LABEL_DROP",
    "LABEL_NONE",
    "LABEL_RETURN",
    "IntensityMask",
    "LidarCameraFrame",
    "RinetStage",
    "available_runtimes",
    "build_mask",
    "bundled_model_path",
    "camera_projection",
    "iter_frames",
    "load_runtime",
    "read_semantic_kitti",
    "rgb_from_airsim",
]
