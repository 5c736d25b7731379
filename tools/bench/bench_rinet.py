"""RINet inference time per frame on every runtime present (ONNX Runtime CPU; TensorRT on a GPU).

Times the whole ``infer`` (resize of the camera image, run, outputs on the host) and the model run
alone, and the full stage (``RinetStage.apply`` on a real embedded HDL-64E scan). Prints JSON.
Run: .venv/bin/python tools/bench/bench_rinet.py [--model M.onnx] [--frames 50] [--out rinet.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.rinet.runtime import bundled_model_path, runtimes_here
from rt_lidar.rinet.stage import RinetStage
from rt_lidar.unreal_bridge.world import CameraSpec


def _stats(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99))}


def bench(model: Path, frames: int, cam: CameraSpec) -> dict[str, object]:
    """Per runtime: infer / model-only / stage milliseconds a frame."""
    built = build_pipeline("HDL-64E", "street", seed=0)
    scan = built.pipeline.scans(1)[0]
    rgb = built.world.render_camera(cam, scan.start_ns * 1e-9).rgb
    out: dict[str, object] = {}
    loaded, skipped = runtimes_here(model)
    for name, rt in loaded.items():
        stage = RinetStage(model, cam, built.world.scene.sensor_mount, runtime=rt)
        for _ in range(5):
            rt.infer(rgb)
        infer_ms, run_ms, stage_ms = [], [], []
        for _ in range(frames):
            t = time.perf_counter()
            rt.infer(rgb)
            infer_ms.append((time.perf_counter() - t) * 1e3)
            run_ms.append(rt.last_ms)
        for _ in range(max(5, frames // 5)):
            t = time.perf_counter()
            stage.apply(scan, rgb)
            stage_ms.append((time.perf_counter() - t) * 1e3)
        out[name] = {
            "provider": rt.provider,
            "model_input": [rt.height, rt.width],
            "infer_ms": _stats(infer_ms),
            "model_run_ms": _stats(run_ms),
            "stage_ms": _stats(stage_ms),
            "stage_points": int(scan.points.size),
        }
    return {"runtimes": out, "skipped": skipped}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=bundled_model_path())
    ap.add_argument("--frames", type=int, default=50)
    ap.add_argument("--width", type=int, default=640, help="camera image width (default 640)")
    ap.add_argument("--height", type=int, default=360, help="camera image height (default 360)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    result = {
        "model": str(args.model),
        "model_bytes": args.model.stat().st_size,
        "camera": [args.height, args.width],
        "frames": args.frames,
        **bench(args.model, args.frames, CameraSpec(width=args.width, height=args.height)),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        write_json(args.out, result)


if __name__ == "__main__":
    main()
