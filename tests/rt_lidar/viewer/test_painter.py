"""The demo's camera painter: an idle-class child process paints what the publisher would have painted
itself, one frame at a time, over a pipe of raw bytes."""

from __future__ import annotations

import time

import numpy as np

from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.unreal_bridge.world import CameraSpec
from rt_lidar.viewer.painter import CameraPainter, intensity_mask


def test_painter_paints_what_the_world_renders() -> None:
    built = build_pipeline("VLP-16", "street", seed=2)
    scan = built.pipeline.scans(2)[1]
    size = (160, 90)
    painter = CameraPainter("street", 2, size, built.preset.output.intensity_max)
    try:
        deadline = time.monotonic() + 120
        while not painter.submit(scan.points, scan.start_ns):  # False until the child built its world
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert painter.busy and not painter.submit(scan.points, scan.start_ns)  # one at a time
        got = painter.take(timeout_s=60.0)
        assert got is not None and not painter.busy
        rgb, mask, start_ns = got
        camera = CameraSpec(width=size[0], height=size[1])
        np.testing.assert_array_equal(rgb, built.world.render_camera(camera, scan.start_ns * 1e-9).rgb)
        imax = built.preset.output.intensity_max
        expected = intensity_mask(scan.points, built.world.scene.sensor_mount, camera, imax)
        np.testing.assert_array_equal(mask, expected)
        assert start_ns == scan.start_ns and (mask > 0).sum() > 100
        assert painter.take() is None  # nothing asked for
    finally:
        painter.close()
    assert not painter._proc.is_alive()
