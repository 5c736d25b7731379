"""A fault on the sensor's window dims the light that enters it once from outside, not only its own
echoes: the sunlight background (its noise floor, its false alarms, blinding near the sun) and another
rig sensor's pulse (crosstalk), each one way (``Hits.window_one_way``: a blockage 0, dirt of one-way
transmission T passes T, where the sensor's own echo passes T^2). One test body over every backend
present: the host backends (NumPy, the compiled twins, the CUDA source on the CPU, CuPy) and the device
frame (its CPU twin ``cuda-source-on-cpu``, and CUDA on a GPU).

The power faults act on the hits alone (``Pipeline.on_hits``), without the plan's point filter that
takes a blocked sector's points out of a run afterwards: what is checked is the physics."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from crosstalk_points import crosstalk_false_points

from rt_lidar.backend.physics_ops import BACKEND_NAMES, available_backends, backend_named
from rt_lidar.faults.spec import faults_from_table
from rt_lidar.faults.wiring import fault_plan
from rt_lidar.kernels.xp import cupy_available
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.device_world import BvhWorld, world_on_device
from rt_lidar.points import PointFlag
from rt_lidar.rig.experiment import _ground, facing_pair
from rt_lidar.rig.loop import RigLoop

NO_CUDA = pytest.mark.skipif(not cupy_available(), reason="no CUDA device")
RUNS = [
    *BACKEND_NAMES,
    "device:cuda-source-on-cpu",
    pytest.param("device:cuda", marks=NO_CUDA),
]
NOISE = int(PointFlag.AMBIENT_NOISE)
SUN = {"sun_illuminance_lux": 100_000.0, "sun_direction": (-1.0, 0.0, 0.05)}
"""Full sun low behind the sensor: the street lit, the sensor blinded once a turn near 180 deg."""
TOWARDS_SUN = (135.0, 225.0)
AWAY_FROM_SUN = (-45.0, 45.0)


def _faults(table: dict | list[dict]) -> tuple:
    return faults_from_table({"fault": table if isinstance(table, list) else [table]}, "test")


def _on_hits(faults: dict | list[dict], preset, seed: int):
    """The hits' hook of ``faults``' plan (their power faults on each frame's hits)."""
    plan = fault_plan(_faults(faults), preset, seed)
    assert plan is not None
    return plan.on_hits


def _skip_absent(run: str) -> None:
    if run == "device:cuda" and not cupy_available():
        pytest.skip("no CUDA device")
    if not run.startswith("device:"):
        why = available_backends()[run]
        if why is not None:
            pytest.skip(f"{run}: {why}")


def _sunlit_scan(run: str, fault: dict | list[dict] | None):
    """The second VLP-16 scan of the street in full sun on ``run``, ``fault`` (or faults) on the hits
    (no range noise or walk: an echo lies where it lies, so scans match point by point)."""
    _skip_absent(run)
    physics = PhysicsConfig(range_noise=False, range_walk=False, **SUN)  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if run.startswith("device:"):
            world = world_on_device(build_world("street", seed=0), run.split(":", 1)[1])
            built = build_pipeline("VLP-16", world, seed=0, physics=physics)
        else:
            built = build_pipeline("VLP-16", "street", seed=0, physics=physics, backend=backend_named(run))
        if fault is not None:
            built.pipeline.on_hits = _on_hits(fault, built.pipeline.preset, 0)
        try:
            return built.pipeline.scans(2)[1]
        finally:
            built.pipeline.close()


def _in_sector(p: np.ndarray, span: tuple[float, float], margin: float = 1.0) -> np.ndarray:
    az = (np.degrees(np.arctan2(p["y"], p["x"])) - span[0]) % 360.0
    return (az > margin) & (az < (span[1] - span[0]) % 360.0 - margin)


def _matched(clean: np.ndarray, dirty: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices (clean, dirty) of the same echo: the same pulse (time, ring) at the same place."""

    def key(p: np.ndarray) -> np.ndarray:
        cols = [p[c].astype(np.float64) for c in ("x", "y", "z")]
        return np.rec.fromarrays([p["t"].astype(np.int64), p["ring"].astype(np.int64), *cols])

    _, i, j = np.intersect1d(key(clean), key(dirty), return_indices=True)
    return i, j


@pytest.mark.parametrize("run", RUNS)
def test_a_blocked_window_sees_no_sunlight(run: str) -> None:
    """Blockages over the sector towards the sun and the one ahead (lit from behind): no sunlight false
    alarm towards the sun (the old code still blinded every pulse near the sun behind the cover, ~27
    noise points a scan) and no background on any point in either sector (the old code kept the lit
    street's ahead); the sun still lights the sectors between."""
    clean = _sunlit_scan(run, None)
    c = clean.points
    assert int((((c["flags"] & NOISE) != 0) & _in_sector(c, TOWARDS_SUN)).sum()) >= 10
    lit_ahead = np.asarray(clean.extras["ambient_w"])[_in_sector(c, AWAY_FROM_SUN, margin=0.0)]
    assert int(np.count_nonzero(lit_ahead)) > 1000
    blocked = _sunlit_scan(
        run,
        [{"kind": "blockage", "azimuth_deg": list(span)} for span in (TOWARDS_SUN, AWAY_FROM_SUN)],
    )
    p = blocked.points
    noise = (p["flags"] & NOISE) != 0
    assert int((noise & _in_sector(p, TOWARDS_SUN, margin=0.0)).sum()) == 0
    ambient = np.asarray(blocked.extras["ambient_w"])
    for span in (TOWARDS_SUN, AWAY_FROM_SUN):
        assert np.all(ambient[_in_sector(p, span, margin=0.0)] == 0.0), span
    assert int(np.count_nonzero(ambient[_in_sector(p, (50.0, 130.0))])) > 1000


@pytest.mark.parametrize("run", RUNS)
def test_a_half_dirty_window_passes_the_sunlight_one_way(run: str) -> None:
    """Dirt of one-way transmission T = sqrt(1/2) over the whole window (T^2 = 1/2 of every echo): the
    sunlight background behind each echo is T of the clean window's (one way, not T^2), and dirt does
    not stop the sun's blinding (the noise points near the sun stay)."""
    t = math.sqrt(0.5)
    clean = _sunlit_scan(run, None)
    dirty = _sunlit_scan(run, {"kind": "dirt", "transmission": t, "scatter_rate": 0.0})
    i, j = _matched(clean.points, dirty.points)
    echo = (clean.points["flags"][i] & NOISE) == 0
    assert int(echo.sum()) > 10_000
    a = np.asarray(clean.extras["ambient_w"], np.float64)[i][echo]
    b = np.asarray(dirty.extras["ambient_w"], np.float64)[j][echo]
    lit = a > 0
    assert int(lit.sum()) > 5000
    np.testing.assert_allclose(b[lit] / a[lit], t, rtol=1e-5)
    near_sun = lambda p: int((((p["flags"] & NOISE) != 0) & _in_sector(p, TOWARDS_SUN)).sum())  # noqa: E731
    assert near_sun(dirty.points) == near_sun(clean.points) >= 10


def _crosstalk_points(run: str, faults: dict[str, dict], frames: int = 20) -> dict[str, np.ndarray]:
    """The crosstalk false points of two VLP-16s facing each other over a road (the crosstalk
    experiment's pair), each sensor's ``faults`` on its hits, sorted by pulse."""
    _skip_absent(run)
    world = BvhWorld(_ground(), run.split(":", 1)[1]) if run.startswith("device:") else _ground()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loop = RigLoop(facing_pair("VLP-16"), world, sim_hz=20.0, crosstalk=True, seed=3)
    for name, unit in loop.units.items():
        if not run.startswith("device:"):
            unit.pipeline.physics.backend = backend_named(run)
        if name in faults:
            unit.pipeline.on_hits = _on_hits(faults[name], unit.pipeline.preset, 3)
    return crosstalk_false_points(loop, frames)


@pytest.mark.parametrize("run", RUNS)
def test_a_blocked_window_lets_no_crosstalk_in_or_out(run: str) -> None:
    """The near sensor sees the far one's pulses ahead of it (near -37 deg). A blockage over the near
    sensor's window there leaves it no false point (the old code kept every one), and none of its
    pulses reach the far sensor through that sector; a blockage elsewhere changes nothing; a blocked
    aggressor sends nothing."""
    clean = _crosstalk_points(run, {})
    assert clean["near"].size >= 10 and clean["far"].size >= 5
    ahead = _crosstalk_points(run, {"near": {"kind": "blockage", "azimuth_deg": [-60.0, 60.0]}})
    assert ahead["near"].size == 0 and ahead["far"].size == 0
    behind = _crosstalk_points(run, {"near": {"kind": "blockage", "azimuth_deg": [120.0, 240.0]}})
    assert behind["near"].tobytes() == clean["near"].tobytes()
    far_blocked = _crosstalk_points(run, {"far": {"kind": "blockage"}})
    assert far_blocked["near"].size == 0


@pytest.mark.parametrize("run", RUNS)
def test_half_dirty_windows_dim_crosstalk_one_way_each(run: str) -> None:
    """Dirt of one-way transmission T = 1/2: on the victim's window its false points read T of their
    power (one way in, not T^2), on the aggressor's T as well (one way out), on both T^2; the points
    stay where they were (the same pulses and ranges) where they still reach the threshold."""
    dirt = {"kind": "dirt", "transmission": 0.5, "scatter_rate": 0.0}
    clean = _crosstalk_points(run, {})["near"]
    for who, want in (({"near": dirt}, 0.5), ({"far": dirt}, 0.5), ({"near": dirt, "far": dirt}, 0.25)):
        dim = _crosstalk_points(run, who)["near"]
        assert 0 < dim.size <= clean.size
        pulse = clean["t"].astype(np.int64) * 4096 + clean["ring"]  # sorted by (t, ring)
        dim_pulse = dim["t"].astype(np.int64) * 4096 + dim["ring"]
        i = np.minimum(np.searchsorted(pulse, dim_pulse), pulse.size - 1)
        assert (pulse[i] == dim_pulse).all()  # no new false point: each is a pulse's of the clean run
        for axis in "xyz":
            assert (dim[axis] == clean[axis][i]).all(), (who, axis)
        ratio = dim["reflectivity"].astype(np.float64) / clean["reflectivity"][i]
        np.testing.assert_allclose(ratio, want, rtol=1e-5, err_msg=str(who))
