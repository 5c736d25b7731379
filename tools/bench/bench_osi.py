"""Cost of ASAM OSI per sim frame (docs/osi.md): the osi-sensorview sink's SensorView, the
osi-sensordata sink's SensorData, and one OSI model step (parse, physics, SensorData).

    python tools/bench/bench_osi.py VLP-16 HDL-64E [--frames 6]

Frames after the first are timed (the first pays imports and caches); prints one line per preset.
"""

from __future__ import annotations

import argparse
import time

from rt_lidar.osi.encode import FrameEncoder
from rt_lidar.osi.model import OsiLidarModel
from rt_lidar.pipeline.builder import build_pipeline


def bench(preset: str, frames: int) -> str:
    """One preset's line: rays, message size and the three costs, mean ms per frame."""
    pipeline = build_pipeline(preset, "street", seed=0).pipeline
    encoder = FrameEncoder(pipeline, (0.0, 0.0, 1.8, 1.0, 0.0, 0.0, 0.0))
    model = OsiLidarModel(pipeline.preset, pipeline.physics.config)
    view_s = data_s = model_s = 0.0
    size = rays = timed = 0
    for k in range(frames):
        sensed = pipeline.sense()
        pipeline.commit(sensed)
        t0 = time.perf_counter()
        view = encoder.sensor_view(sensed)
        raw = view.SerializeToString()
        t1 = time.perf_counter()
        encoder.sensor_data(sensed, view).SerializeToString()
        t2 = time.perf_counter()
        model.step_bytes(raw)
        t3 = time.perf_counter()
        if k:
            view_s, data_s, model_s = view_s + t1 - t0, data_s + t2 - t1, model_s + t3 - t2
            size, rays, timed = size + len(raw), len(sensed.hits), timed + 1
    ms = 1e3 / max(timed, 1)
    frame_ms = 1e3 / pipeline.sim_hz
    return (
        f"{preset}: {rays} rays a frame, SensorView {size / max(timed, 1) / 1e6:.2f} MB, "
        f"encode SensorView {view_s * ms:.0f} ms, SensorData (sink) {data_s * ms:.0f} ms, "
        f"model step {model_s * ms:.0f} ms per {frame_ms:.0f} ms frame"
    )


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("presets", nargs="+")
    parser.add_argument("--frames", type=int, default=6)
    args = parser.parse_args()
    for preset in args.presets:
        print(bench(preset, max(2, args.frames)))


if __name__ == "__main__":
    main()
