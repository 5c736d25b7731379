"""Cosys-AirSim's GPU lidar intensity reaches the output points: ``rt-lidar serve --flavor cosys`` and
``rt-lidar run --flavor cosys-gpu``, the PCD read back with pypcd4 (``source_intensity``)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pypcd4
import pytest

from rt_lidar.bridge.cosys import CosysGrid, read_cosys_gpu
from rt_lidar.cli.main import main
from rt_lidar.points import PointFlag
from rt_lidar.sensor.presets import load_preset
from rt_lidar.unreal_bridge import AirSimClient

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cosys_serve():
    """``rt-lidar serve --flavor cosys`` on a free loopback port: a concrete plane 10 m ahead, a
    standing sensor (every rotation the server answers is the same)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "rt_lidar.cli.main", "serve", "--flavor", "cosys", "--port", "0"]
    proc = subprocess.Popen(
        [*cmd, "--preset", "VLP-16", "--scene", "plane"],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    found = re.search(r"127\.0\.0\.1:(\d+)", first)
    try:
        assert found, first
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        yield int(found.group(1))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("rain", [0, 50])
def test_cosys_gpu_intensity_is_a_pcd_field_equal_to_the_servers(cosys_serve, tmp_path, rain):
    port = cosys_serve
    out, pcd = tmp_path / "run", tmp_path / "pcd"
    sink = ["--sink", f"pcd:{pcd}"]
    args = ["run", "--airsim", f"127.0.0.1:{port}", "--preset", "VLP-16", "--lockstep", "--no-extension"]
    assert (
        main(
            [
                *args,
                "--flavor",
                "cosys-gpu",
                "--frames",
                "2",
                "--quiet",
                "--out",
                str(out),
                *sink,
                "--rain",
                str(rain),
            ]
        )
        == 0
    )
    with AirSimClient(port=port) as client:
        answered = read_cosys_gpu(client)  # the standing sensor's rotation: what every frame was served
    assert answered.intensity is not None
    grid = CosysGrid.of_preset(load_preset("VLP-16"))
    files = sorted(pcd.glob("*.pcd"))
    assert len(files) == 2
    for path in files:
        cloud = pypcd4.PointCloud.from_path(path)
        assert "source_intensity" in cloud.fields
        xyz = cloud.numpy(("x", "y", "z")).astype(np.float64)
        own = cloud.numpy(("source_intensity",))[:, 0]
        flags = cloud.numpy(("flags",))[:, 0].astype(np.int64)
        assert len(own) > 1000
        has = np.isfinite(own)
        assert has.sum() > 1000
        # a point with no value is not its ray's surface: the receiver's false alarms, rain clutter
        assert np.all(flags[~has] & int(PointFlag.AMBIENT_NOISE | PointFlag.RAIN_CLUTTER))
        assert np.all(flags[has] == 0)
        if rain:
            assert np.count_nonzero(flags[~has] & int(PointFlag.RAIN_CLUTTER)) > 100
        p = xyz[has]
        r = np.linalg.norm(p, axis=1)
        az = np.degrees(np.arctan2(p[:, 1], p[:, 0]))
        el = np.degrees(np.arcsin(p[:, 2] / r))
        cells = grid.cells_of(az, el, gpu=True)
        assert np.min(np.einsum("ij,ij->i", grid.directions(gpu=True)[cells], p / r[:, None])) > 0.99999
        assert np.all(answered.returned[cells])
        assert np.array_equal(own[has], answered.intensity[cells])
        assert np.ptp(own[has]) > 0.05  # the plane's intensity varies with incidence: not one value
