"""``rt-lidar validate --only crosstalk``: mutual interference of two lidars facing each other.

Two sensors 10 m apart, 1 m up, facing each other over an asphalt plane, phase-locked (the near one at
0 deg, the far one at ``PHASE_DEG`` or ``OS1_PHASE_DEG``, where the pulses of some ring pairs meet
on the ground within each other's listening windows once a turn; at most phases they never do, which is
what phase lock is for). Three pairs, five scans each:

* two VLP-16s (903 nm): ``false_points_same_wavelength`` per scan (both sensors' false points);
* a VLP-16 with an OS1-64 (865 nm, outside the VLP-16's 30 nm pass band and vice versa):
  ``false_points_other_wavelength`` per scan;
* the same OS1-64 relabelled 903 nm (``false_points_os1_at_903nm``): the control showing that the
  wavelength alone keeps the second pair apart.

``crosstalk.png`` shows where the false points fall (top view, world frame) with both sensors.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.points import PointFlag
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.model import Rig, rig_from_dict
from rt_lidar.unreal_bridge.world import MeshObject, Pose, Scene, StaticTrajectory, World
from rt_lidar.unreal_bridge.world.pose import quat_rotate

__all__ = [
    "CROSSTALK_CHECKS",
    "DISTANCE_M",
    "OS1_PHASE_DEG",
    "PHASE_DEG",
    "SCANS",
    "crosstalk",
    "facing_pair",
]

DISTANCE_M = 10.0
HEIGHT_M = 1.0
PHASE_DEG = 75.0
"""The far VLP-16's phase: pulses of some ring pairs meet on the ground once a turn (found by a sweep)."""
OS1_PHASE_DEG = 315.0
"""The far OS1-64's phase, found likewise with it relabelled 903 nm (both OS1 pairs use it)."""
SCANS = 5
SIM_HZ = 20.0


def _ground() -> World:
    names = list(Scene(objects=[]).material_names)
    v = np.array([[-200, -200, 0], [200, -200, 0], [200, 200, 0], [-200, 200, 0]], np.float32)
    f = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    ground = MeshObject("ground", v, f, np.full(2, names.index("asphalt"), np.int16), 1)
    return World(Scene(objects=[ground], ego=StaticTrajectory(Pose.identity()), sensor_mount=Pose.identity()))


def facing_pair(far_preset: str, phase_deg: float = PHASE_DEG) -> Rig:
    """A VLP-16 ("near", at the origin, facing +x) and ``far_preset`` ("far", at +x, facing it)."""
    return rig_from_dict(
        {
            "sensor": [
                {
                    "name": "near",
                    "preset": "VLP-16",
                    "mount": {"xyz": [0.0, 0.0, HEIGHT_M]},
                    "phase_deg": 0.0,
                },
                {
                    "name": "far",
                    "preset": far_preset,
                    "phase_deg": phase_deg,
                    "mount": {"xyz": [DISTANCE_M, 0.0, HEIGHT_M], "rpy_deg": [0.0, 0.0, 180.0]},
                },
            ]
        },
        source=f"crosstalk experiment (VLP-16 + {far_preset})",
    )


def _run(rig: Rig, world: World) -> tuple[list[int], np.ndarray]:
    """False points per scan (both sensors) and their world positions."""
    loop = RigLoop(rig, world, sim_hz=SIM_HZ, crosstalk=True)
    got: dict[str, list[Scan]] = {n: [] for n in rig.names}
    while min(len(v) for v in got.values()) < SCANS:
        for name, scans in loop.step().items():
            got[name].extend(scans)
    per_scan = [0] * SCANS
    where = []
    for scans in got.values():
        for i, scan in enumerate(scans[:SCANS]):
            pts = scan.points[(scan.points["flags"] & np.uint8(PointFlag.CROSSTALK)) != 0]
            per_scan[i] += int(pts.size)
            xyz = np.stack([pts["x"], pts["y"], pts["z"]], 1).astype(np.float64)
            where.append(quat_rotate(scan.sensor_rotation, xyz) + scan.sensor_position)
    return per_scan, np.concatenate(where) if where else np.zeros((0, 3))


def crosstalk(out: Path) -> dict[str, Any]:
    """The experiment; writes ``crosstalk.png``."""
    world = _ground()
    same, same_xyz = _run(facing_pair("VLP-16"), world)
    other, other_xyz = _run(facing_pair("OS1-64", OS1_PHASE_DEG), world)
    os1 = facing_pair("OS1-64", OS1_PHASE_DEG)
    far = os1.sensors[1]
    relabelled = dataclasses.replace(
        far.preset, optics=dataclasses.replace(far.preset.optics, wavelength_nm=903.0)
    )
    control, control_xyz = _run(
        dataclasses.replace(os1, sensors=(os1.sensors[0], dataclasses.replace(far, preset=relabelled))), world
    )
    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=110)
    for xyz, label, marker in (
        (same_xyz, "VLP-16 + VLP-16 (903 nm)", "o"),
        (other_xyz, "VLP-16 + OS1-64 (865 nm)", "s"),
        (control_xyz, "VLP-16 + OS1-64 relabelled 903 nm", "x"),
    ):
        ax.scatter(xyz[:, 0], xyz[:, 1], s=14, marker=marker, label=f"{label}: {len(xyz)}")
    ax.plot([0.0, DISTANCE_M], [0.0, 0.0], "k^", ms=10, label="sensors")
    ax.set(title="Where the false (crosstalk) points fall, top view", xlabel="x (m)", ylabel="y (m)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "crosstalk.png")
    plt.close(fig)
    return {
        "false_points_same_wavelength": same,
        "false_points_other_wavelength": other,
        "false_points_os1_at_903nm": control,
        "distance_m": DISTANCE_M,
        "far_phase_deg_vlp16": PHASE_DEG,
        "far_phase_deg_os1": OS1_PHASE_DEG,
    }


CROSSTALK_CHECKS = {
    "crosstalk": [
        ("same wavelength: false points in every scan", lambda m: min(m["false_points_same_wavelength"]) > 0),
        ("other wavelength: no false point", lambda m: max(m["false_points_other_wavelength"]) == 0),
        ("the OS1-64 at 903 nm does interfere", lambda m: sum(m["false_points_os1_at_903nm"]) > 0),
    ]
}
