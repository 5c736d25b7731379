"""Stock ``getLidarData`` of a preset whose beams start off the axis: our server answers each hit where
its echo came from (the beam's origin plus the range along it), as a stock AirSim client expects a
hit point, and our bridge's stock path recovers the range along the beam and the direction from it."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
from served import served

from rt_lidar.bridge.hits import hits_from_wire
from rt_lidar.bridge.recover import recover_hits
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge import AirSimClient

REF = str(
    Path(__file__).resolve().parents[1] / "data" / "vendor" / "ouster" / "OS-0-32-U1_v2.2.0_1024x10.json"
)


def _second_read(stock: bool):
    """The second read of a fresh server after 50 ms of sim (the first starts the time origin)."""
    with served(REF) as (_sim, server), AirSimClient(port=server.port) as client:
        read = client.get_lidar_data if stock else client.rt_lidar_get_hits
        read()
        client.sim_continue_for_time(0.05)
        return read()


def _rows(a: np.ndarray) -> set[tuple[float, ...]]:
    return {tuple(r) for r in np.round(np.asarray(a, np.float64), 3).tolist()}


def test_stock_points_are_where_the_echoes_came_from_and_recover_to_the_ranges():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        preset = load_preset(REF)
    assert preset.beam_origins_m is not None
    frame, ans = _second_read(True), _second_read(False)
    hits = hits_from_wire(ans)
    t0, t1 = int(ans.info["t0_ns"]), int(ans.info["t1_ns"])
    assert t1 == frame.time_stamp
    local = firings_between(preset, t0, t1)
    assert np.array_equal(local.ring, hits.firings.ring) and np.array_equal(local.t_ns, hits.firings.t_ns)
    assert local.origin is not None
    hit = np.isfinite(hits.range_m)
    along = hits.direction[hit].astype(np.float64) * hits.range_m[hit, None]
    echoes = local.origin[hit] + along
    stock = _rows(frame.points)
    assert len(frame.points) >= hit.sum() > 5_000
    assert np.mean([r in stock for r in _rows(echoes)]) > 0.99
    assert np.mean([r in stock for r in _rows(along)]) < 0.2  # from the axis: centimetres away
    rec = recover_hits(frame.points, frame.segmentation, local, preset)
    both = hit & np.isfinite(rec.range_m)
    assert both.sum() > 0.99 * hit.sum()
    assert np.percentile(np.abs(rec.range_m[both] - hits.range_m[both]), 99) < 1e-4
    cos = np.einsum("ij,ij->i", rec.direction[both], hits.direction[both])
    assert np.percentile(cos, 1) > 1 - 1e-6
