"""Cosys-AirSim's lidars: our server in Cosys's wire form read by the real ``cosysairsim`` client and by our
controller (CPU lidar with ``groundtruth`` names, GPU lidar with colours and intensities)."""

from __future__ import annotations

import numpy as np
import pytest
from peers import run_peer_json

from rt_lidar.bridge.cosys import (
    OUT_OF_RANGE,
    CosysGrid,
    grid_error_deg,
    packed_colours,
    read_cosys_cpu,
    read_cosys_gpu,
    segmentation_colours,
)
from rt_lidar.bridge.material_rules import load_material_rules
from rt_lidar.bridge.source import BridgeSource
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.server.cosys_flavor import CosysLidars, serve_cosys
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer
from rt_lidar.unreal_bridge.world import World, street_scene
from rt_lidar.unreal_bridge.world.scenes import plane_scene

NAMES = load_material_table().names


def run_peer(script: str, *args: str) -> dict:
    return run_peer_json("cosys", ["-c", script, *args], timeout=180)


@pytest.fixture(scope="module")
def cosys_server():
    """The street with a standing ego (a rotation's columns and a frame's firings see the same scene)."""
    sim = EmbeddedSim(World(street_scene(seed=5, ego_speed=0.0)), load_preset("VLP-16"), paused=True)
    server = AirSimServer(sim, port=0)
    lidars = serve_cosys(server, sim)
    server.start()
    sim.continue_for_time(0.25)  # two whole rotations have ended
    yield sim, server, lidars
    server.close()


def test_colour_map_is_cosys_airsims():
    script = "import json, cosysairsim as c; print(json.dumps(c.CarClient.simGetSegmentationColorMap()"
    got = run_peer(script + "[:4096].tolist()))")
    assert np.array_equal(segmentation_colours(4096), np.array(got))


def test_grid_cells_round_trip_and_error_bound():
    preset = load_preset("HDL-64E")  # a non-uniform beam table served by an evenly spaced grid
    grid = CosysGrid.of_preset(preset)
    for gpu in (False, True):
        d = grid.directions(gpu)
        az = np.degrees(np.arctan2(d[:, 1], d[:, 0]))
        el = np.degrees(np.arcsin(d[:, 2]))
        cells = grid.cells_of(az, el, gpu)
        inner = np.arange(grid.size) < grid.size - grid.channels  # the last column is the first again
        assert np.array_equal(cells[inner], np.arange(grid.size)[inner])
    firings = firings_between(preset, 0, 100_000_000)
    h, v = grid.angular_step_deg()
    ring_el = np.asarray(preset.elevations_deg)
    worst_ring = float(np.max(np.abs(np.subtract.outer(ring_el, grid.cpu_elevations())).min(axis=1)))
    err = grid_error_deg(grid, firings.azimuth_deg, firings.elevation_deg)
    assert 0 < err <= np.hypot(h / 2, worst_ring) + 1e-6 and worst_ring <= v / 2 + 1e-9


PEER_SCRIPT = r"""
import json, sys, numpy as np, cosysairsim as ca
c = ca.CarClient(port=int(sys.argv[1]), timeout_value=30)
d = c.getLidarData()
g = c.getGPULidarData()
print(json.dumps({"cloud": np.asarray(d.point_cloud, np.float32).tolist(), "labels": d.groundtruth,
                  "t": d.time_stamp, "gpu": np.asarray(g.point_cloud, np.float32).tolist(),
                  "pose_z": d.pose.position.z_val, "names": c.simListInstanceSegmentationObjects()}))
"""


def test_cosys_client_reads_our_cosys_answers(cosys_server):
    sim, server, lidars = cosys_server
    grid = lidars.grid
    seen = run_peer(PEER_SCRIPT, str(server.port))
    cloud = np.array(seen["cloud"], np.float32).reshape(-1, 3)
    labels = seen["labels"]
    assert len(cloud) == len(labels) == grid.size == 16 * grid.measurements
    zero = ~cloud.any(axis=1)
    assert zero.any() and np.array_equal(zero, np.array(labels) == OUT_OF_RANGE)
    assert set(labels) - {OUT_OF_RANGE} <= set(seen["names"]) == set(sim.actor_names.values())
    assert seen["t"] == 200_000_000 and seen["pose_z"] == pytest.approx(-1.8, abs=1e-3)  # NED: up is -z
    # the same bytes through our reader; column-major, channel 0 the highest (NED z most negative)
    with AirSimClient(port=server.port) as client:
        ours = read_cosys_cpu(client)
        gpu_ours = read_cosys_gpu(client)
    assert np.array_equal(ours.points, cloud * np.float32([1, -1, -1])) and ours.labels == labels
    dirs = grid.directions()
    hit = ~zero
    unit = ours.points[hit] / np.linalg.norm(ours.points[hit], axis=1)[:, None]
    assert np.max(np.abs(unit - dirs[hit])) < 1e-5
    # GPU: five floats a cell, channels from the lowest up; its colour is the hit object's segment id's
    gpu = np.array(seen["gpu"], np.float32).reshape(-1, 5)
    assert len(gpu) == grid.size
    as_cpu = gpu.reshape(grid.measurements, grid.channels, 5)[:, ::-1].reshape(-1, 5)
    kept = as_cpu[:, :3].any(axis=1)
    assert 0 < kept.sum() < hit.sum() and not (kept & zero).any()  # under Cosys's threshold: dropped
    assert np.allclose(as_cpu[kept, :3], ours.points[kept], atol=1e-5)
    seg = sim.world.segment_ids()
    want = packed_colours(256)[[seg[sim.world_name(n)] for n in np.array(labels)[kept]]]
    assert np.array_equal(as_cpu[kept, 3].astype(np.uint32), want)
    assert np.all((as_cpu[kept, 4] > 0) & (as_cpu[kept, 4] <= 1.0))
    assert np.array_equal(gpu_ours.rgb, np.rint(gpu[:, 3]).astype(np.uint32))


@pytest.mark.parametrize("flavor", ["auto", "cosys-gpu"])
def test_controller_reads_both_cosys_lidars(cosys_server, flavor):
    sim, server, _ = cosys_server
    preset = load_preset("VLP-16")
    rules = load_material_rules(None, NAMES)
    with AirSimClient(port=server.port) as client:
        source = BridgeSource(
            client, preset, lockstep=True, use_extension=False, material_rules=rules, flavor=flavor
        )
        assert source.stats.flavor == ("cosys" if flavor == "auto" else "cosys-gpu")
        t0 = source.start_ns
        firings = firings_between(preset, t0, t0 + 50_000_000)
        got = source.hits(firings, t0, t0 + 50_000_000)
    truth = sim.source.hits(firings, t0, t0 + 50_000_000)
    both = np.isfinite(got.range_m) & np.isfinite(truth.range_m)
    assert both.sum() > (0.1 if flavor == "cosys-gpu" else 0.8) * len(firings)  # GPU: Cosys drops dim returns
    assert np.median(np.abs(got.range_m[both] - truth.range_m[both])) < 0.05
    got_names = np.array(source.material_names)[got.material[both]]
    true_names = np.array(sim.world.material_names)[truth.material[both]]
    # names tell an object's class, not its faces' materials (a car's glass and cabin, a building's
    # windows and the rooms behind them): compared by class, where the rules must be right
    got_class, true_class = _classes(got_names), _classes(true_names)
    inside = np.isin(true_names, ["interior", "car_interior"])
    same = (got_class == true_class) | (inside & np.isin(got_class, ["car", "building"]))
    assert np.mean(same) > 0.95
    # a rule names one material an actor; since issue 40's silver cars (the car rule says white paint),
    # dark cabins and crowns of leaves (docs/realism.md changes 23, 26, 28) fewer faces share it: the GPU
    # flavour, which keeps only Cosys's brighter returns, 0.37 of them (0.4 before)
    assert np.mean(got_names == true_names) > 0.33
    assert source.stats.grid_error_deg is not None and source.stats.grid_error_deg < 0.2
    if flavor == "cosys-gpu":
        assert got.source_intensity is not None and np.all(got.source_intensity[both] > 0)
        assert source.stats.materials is not None and source.stats.materials["on_default"] == 0
    else:
        assert got.source_intensity is None
        said = source.material_assignment  # the CPU lidar's names are read through the rules: no ids set
        assert said is not None and said.ids == {} and said.unmatched == []
        assert sum(len(v) for v in said.objects.values()) == len(sim.actor_names)


_CLASS = {
    **dict.fromkeys(
        [
            "car_paint_red",
            "car_paint_white",
            "car_paint_black",
            "car_paint_silver",
            "chrome",
            "plate_sheeting",
            "rubber",
            "car_glass",
            "car_glass_ir",
            "car_glass_privacy",
            "car_interior",
        ],
        "car",
    ),
    **dict.fromkeys(["brick", "building_plaster", "glass"], "building"),
    **dict.fromkeys(["vegetation", "bark"], "tree"),
}


def _classes(names: np.ndarray) -> np.ndarray:
    """The class each material belongs to (itself where it is a class of its own)."""
    return np.array([_CLASS.get(str(n), str(n)) for n in names])


def test_gpu_intensity_is_the_materials_reflectance_times_the_cosine():
    """Cosys's GPU lidar intensity is the material's reflectance times the cosine of incidence: for a rough
    material (concrete: Hapke's road lobes) the whole reflectance, not the echo model's diffuse lobe alone,
    so a concrete wall 10 m ahead stays above Cosys's threshold well away from normal incidence."""
    preset = load_preset("VLP-16")
    sim = EmbeddedSim(World(plane_scene(10.0, "concrete")), preset, paused=True)
    lidars = CosysLidars(sim)
    sim.continue_for_time(0.25)
    rot = lidars.rotation(gpu=True)
    assert rot is not None
    hit = np.linalg.norm(rot.points, axis=1) > 0
    p = rot.points[hit].astype(np.float64)
    cos = np.abs(p[:, 0]) / np.linalg.norm(p, axis=1)  # the plane faces the sensor along x
    rho = load_material_table().reflectance("concrete", preset.optics.wavelength_nm)
    assert hit.sum() > 1000
    np.testing.assert_allclose(rot.intensity[hit], rho * cos, rtol=1e-4)
    # Cosys's threshold (100 m / 80 % / 100 * range, range = 10 m / cos) holds wherever rho cos^2 >= 0.125:
    # the whole 20 m plane (cos >= 0.68) with concrete's reflectance, only cos > 0.92 with its diffuse lobe
    assert cos.min() < 0.75
    assert np.all(rot.kept[hit])
