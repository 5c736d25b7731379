"""The GPU paths on a CUDA machine: the CuPy kernels against NumPy, a frame loop's kernels on the GPU, and
RINet on every runtime present. Prints JSON; without CuPy and a CUDA device it says so and exits 2.

- ``weather``: the fused CUDA weather kernel (:func:`kernels.weather_cuda.apply_weather_cuda`) against
  the NumPy model on the same synthetic rays (``bench_weather``'s), per configuration and size: the
  kernel alone on device-resident arrays, and with the copies to and from the host; how many rays end
  with the same flag and range.
- ``frame_loop``: real frames of the embedded world (HDL-64E and VLS-128, rain and dual returns, sub-ray
  bundles) are made by the CPU pipeline while every call of the per-ray kernels (weather; the echo
  waveform's returns) is recorded; then the frames' calls are replayed, once on NumPy and once on
  CuPy with the copies in and out, and the outputs compared. That is the kernels' share of a frame on
  each side, not a whole frame (casting stays on the CPU).
- ``pipeline``: the same frames made by the real frame loop with ``kernels_device`` ``cpu`` and then
  ``cuda``: wall time a scan on one thread and how many of the CPU scans' points the CUDA ones have.
- ``rinet``: each RINet runtime that can run (TensorRT, PyTorch on CUDA, ONNX Runtime) on a camera
  image: milliseconds a frame and the largest difference from ONNX Runtime on the CPU.

Run: python tools/bench/bench_gpu.py [--frames 6] [--repeat 20] [--out gpu.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from machine_record import write_json  # tools/bench, beside this script
from PIL import Image

from rt_lidar.kernels.xp import cupy_available


def gpu_info(cp: Any) -> dict[str, Any]:
    """The device's name, compute capability, memory and CUDA versions."""
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    return {
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "memory_gib": round(props["totalGlobalMem"] / 2**30, 1),
        "multiprocessors": int(props["multiProcessorCount"]),
        "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
        "cuda_driver": cp.cuda.runtime.driverGetVersion(),
        "cupy": cp.__version__,
    }


def _median_ms(fn: Callable[[], Any], repeat: int, sync: Callable[[], None]) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e3)


def bench_weather(cp: Any, sizes: list[int], repeat: int) -> dict[str, Any]:
    """NumPy model against the CUDA kernel on ``bench_weather``'s synthetic rays."""
    from bench_weather import CONFIGS, synthetic_rays  # tools/bench, beside this script

    from rt_lidar.physics.weather import WeatherModel
    from rt_lidar.sensor.presets import load_preset

    names = ("rain_25mm_h", "fog_100m", "snow_1mm_h", "rain_10_fog_200")
    preset = load_preset("VLP-16")
    thr = preset.pulse.detection_threshold_w
    out: dict[str, Any] = {}
    for n in sizes:
        r0, p0, rng = synthetic_rays(preset, n)
        refl = rng.uniform(0.05, 0.6, n).astype(np.float32)
        for name in names:
            prm = WeatherModel(CONFIGS[name]).params(preset, thr)
            out[f"{name}@{n}"] = _weather_case(cp, (r0, p0, refl), prm, repeat)
    return out


def _weather_case(
    cp: Any, rays: tuple[np.ndarray, np.ndarray, np.ndarray], prm: Any, repeat: int
) -> dict[str, Any]:
    """One configuration on one set of rays: NumPy, the CUDA kernel alone, and with its copies."""
    from rt_lidar.kernels.weather_cuda import apply_weather_cuda
    from rt_lidar.kernels.weather_rays import apply_weather

    r0, p0, refl = rays
    n = r0.size
    sync = cp.cuda.Device().synchronize
    d_r0, d_p0, d_refl = cp.asarray(r0), cp.asarray(p0), cp.asarray(refl)

    def host() -> tuple[np.ndarray, ...]:
        r, p, f = r0.copy(), p0.copy(), np.zeros(n, np.uint8)
        apply_weather(r, p, f, refl.copy(), prm, 12345)
        return r, p, f

    def device() -> tuple[Any, ...]:
        r, p, f = d_r0.copy(), d_p0.copy(), cp.zeros(n, cp.uint8)
        apply_weather_cuda(r, p, f, d_refl.copy(), prm, 12345)
        return r, p, f

    def round_trip() -> tuple[np.ndarray, ...]:
        r, p, f = cp.asarray(r0), cp.asarray(p0), cp.zeros(n, cp.uint8)
        apply_weather_cuda(r, p, f, cp.asarray(refl), prm, 12345)
        return cp.asnumpy(r), cp.asnumpy(p), cp.asnumpy(f)

    numpy_ms = _median_ms(host, max(3, repeat // 4), lambda: None)
    cuda_ms = _median_ms(device, repeat, sync)
    trip_ms = _median_ms(round_trip, repeat, sync)
    hr, _, hf = host()
    gr, _, gf = round_trip()
    with np.errstate(invalid="ignore"):  # inf - inf of rays that hit nothing
        close = (hr == gr) | (np.abs(hr - gr) <= 1e-3 * np.maximum(np.abs(hr), 1.0))
    same = (hf == gf) & (close | ~np.isfinite(hr) & ~np.isfinite(gr))
    return {
        "rays": n,
        "numpy_ms": round(numpy_ms, 3),
        "cuda_kernel_ms": round(cuda_ms, 3),
        "cuda_with_copies_ms": round(trip_ms, 3),
        "speedup_kernel": round(numpy_ms / cuda_ms, 1),
        "speedup_with_copies": round(numpy_ms / trip_ms, 1),
        "cuda_M_rays_per_s": round(n / cuda_ms / 1e3, 1),
        "same_outcome_share": round(float(same.mean()), 6),
        "clutter_share_numpy": round(float((hf != 0).mean()), 4),
        "clutter_share_cuda": round(float((gf != 0).mean()), 4),
    }


class _Recorder:
    """Records every call of the per-ray kernels while the CPU pipeline makes frames."""

    def __init__(self) -> None:
        self.weather: list[tuple[Any, ...]] = []
        self.waveform: list[tuple[Any, ...]] = []

    def __enter__(self) -> _Recorder:
        import rt_lidar.kernels.waveform_pulses as twin
        import rt_lidar.kernels.weather_rays as wr
        import rt_lidar.physics.device as ret

        # the backend (rt_lidar/backend/physics_ops.py) runs the echo waveform through the compiled
        # twin when it takes the arrays, else through physics.device's NumPy call: both are hooked
        self._wr, self._ret, self._twin = wr, ret, twin
        self._apply, self._wave = wr.apply_weather, ret.waveform_returns
        self._twin_wave = twin.waveform_returns

        def apply(
            range_m: Any,
            power_w: Any,
            flags: Any,
            refl: Any,
            prm: Any,
            key: int,
            chunk: int = 32768,
            echoes: Any = None,
            window: Any = None,
        ) -> Any:
            shapes = None if echoes is None else [(e.shape, e.dtype) for e in echoes]
            win = None if window is None else window.copy()
            self.weather.append(
                (range_m.copy(), power_w.copy(), flags.copy(), refl.copy(), prm, key, shapes, win)
            )
            return self._apply(range_m, power_w, flags, refl, prm, key, chunk, echoes=echoes, window=window)

        def record(args: tuple[Any, ...]) -> None:
            self.waveform.append(tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args))

        def wave(*args: Any) -> Any:
            record(args)
            return self._wave(*args)

        def twin_wave(*args: Any) -> Any:
            copies = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
            got = self._twin_wave(*args)
            if got is not None:  # None: the backend falls back to the NumPy call, recorded there
                self.waveform.append(copies)
            return got

        wr.apply_weather, ret.waveform_returns, twin.waveform_returns = apply, wave, twin_wave
        return self

    def __exit__(self, *exc: Any) -> None:
        self._wr.apply_weather, self._ret.waveform_returns = self._apply, self._wave
        self._twin.waveform_returns = self._twin_wave


def _replay_weather(
    calls: list[tuple[Any, ...]], xp: Any, to_host: Callable[[Any], np.ndarray]
) -> list[np.ndarray]:
    from rt_lidar.kernels.weather_cuda import apply_weather_cuda
    from rt_lidar.kernels.weather_rays import apply_weather

    outs = []
    for r, p, f, refl, prm, key, shapes, win in calls:
        a = [xp.asarray(x).copy() for x in (r, p, f, refl)]
        echoes = None if shapes is None else tuple(xp.zeros(s, d) for s, d in shapes)
        window = None if win is None else xp.asarray(win)
        if xp is np:
            apply_weather(a[0], a[1], a[2], a[3], prm, key, echoes=echoes, window=window)
        else:
            apply_weather_cuda(a[0], a[1], a[2], a[3], prm, key, echoes=echoes, window=window)
        outs.append(np.concatenate([to_host(a[0]), to_host(a[2]).astype(np.float32)]))
    return outs


def _replay_waveform(
    calls: list[tuple[Any, ...]], xp: Any, to_host: Callable[[Any], np.ndarray]
) -> list[Any]:
    from rt_lidar.kernels.waveform import waveform_returns

    outs = []
    for t_tab, a_tab, *rest in calls:
        ret = waveform_returns(xp.asarray(t_tab), xp.asarray(a_tab), *rest)
        outs.append((to_host(ret.pulse), to_host(ret.return_id), to_host(ret.t_ns), to_host(ret.amp)))
    return outs


def _same_share(a: np.ndarray, b: np.ndarray) -> float:
    """Share of equal entries (within 1e-3, or both not finite) of two replays' outputs."""
    with np.errstate(invalid="ignore"):  # inf - inf of rays that hit nothing
        return float(np.mean((a == b) | (np.abs(a - b) <= 1e-3) | ~np.isfinite(a) & ~np.isfinite(b)))


def _returns_matched(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> tuple[int, float]:
    """Returns of one call found on both sides (same pulse and return number, times within 0.01 ns),
    and the largest time difference among those paired by pulse and number."""
    ka = a[0].astype(np.int64) * 8 + a[1]
    kb = b[0].astype(np.int64) * 8 + b[1]
    common, ia, ib = np.intersect1d(ka, kb, return_indices=True)
    if common.size == 0:
        return 0, 0.0
    dt = np.abs(a[2][ia] - b[2][ib])
    return int((dt < 0.01).sum()), float(dt.max())


def bench_frame_loop(cp: Any, presets: list[str], frames: int, repeat: int) -> dict[str, Any]:
    """Record real frames' kernel calls on the CPU pipeline, then replay them on NumPy and on CuPy."""
    from rt_lidar.physics.model import PhysicsConfig
    from rt_lidar.physics.weather import WeatherConfig
    from rt_lidar.pipeline.builder import build_pipeline
    from rt_lidar.sensor.beam import BeamConfig

    sync = cp.cuda.Device().synchronize
    out: dict[str, Any] = {}
    for name in presets:
        cfg = PhysicsConfig(
            weather=WeatherConfig(rain_mm_h=25.0), beam=BeamConfig(sub_rays=7, return_mode="dual")
        )
        built = build_pipeline(name, "street", seed=0, physics=cfg)
        built.pipeline.scans(1)  # warm caches outside the record
        t = time.perf_counter()
        with _Recorder() as rec:
            scans = built.pipeline.scans(frames)
        cpu_frame_s = (time.perf_counter() - t) / frames
        points = int(np.mean([s.points.size for s in scans]))

        def host() -> tuple[list[Any], list[Any]]:
            return _replay_weather(rec.weather, np, np.asarray), _replay_waveform(
                rec.waveform, np, np.asarray
            )

        def device() -> tuple[list[Any], list[Any]]:
            return _replay_weather(rec.weather, cp, cp.asnumpy), _replay_waveform(
                rec.waveform, cp, cp.asnumpy
            )

        numpy_ms = _median_ms(host, max(3, repeat // 5), lambda: None) / frames
        cuda_ms = _median_ms(device, max(3, repeat // 2), sync) / frames
        (hw, hv), (gw, gv) = host(), device()
        w_same = float(np.mean([_same_share(a, b) for a, b in zip(hw, gw, strict=True)])) if hw else 1.0
        matched = [_returns_matched(a, b) for a, b in zip(hv, gv, strict=True)]
        n_ret = sum(len(a[0]) for a in hv)
        out[name] = {
            "frames": frames,
            "points_per_frame": points,
            "weather_calls": len(rec.weather),
            "weather_rays": int(sum(c[0].size for c in rec.weather)),
            "waveform_calls": len(rec.waveform),
            "waveform_pulses": int(sum(c[0].shape[0] for c in rec.waveform)),
            "cpu_pipeline_ms_per_frame": round(cpu_frame_s * 1e3, 2),
            "kernels_numpy_ms_per_frame": round(numpy_ms, 2),
            "kernels_cuda_ms_per_frame": round(cuda_ms, 2),
            "speedup": round(numpy_ms / cuda_ms, 1),
            "kernels_share_of_cpu_frame": round(numpy_ms / (cpu_frame_s * 1e3), 3),
            "weather_same_outcome_share": round(w_same, 6),
            "waveform_returns_numpy": n_ret,
            "waveform_returns_cuda": int(sum(len(b[0]) for b in gv)),
            "waveform_returns_matched_share": round(sum(m for m, _ in matched) / max(1, n_ret), 6),
            "waveform_max_time_diff_ns": max((d for _, d in matched), default=0.0),
        }
    return out


def bench_pipeline_devices(
    presets: list[str], scans: int, devices: tuple[str, str] = ("cpu", "cuda")
) -> dict[str, Any]:
    """The real frame loop (in-process, rain 25 mm/h, dual returns, 7 sub-rays) with its weather and
    waveform kernels on the CPU and on CUDA (``kernels_device``): wall time a scan, the real-time factor
    on one thread, and the share of the CPU scans' points the CUDA scans also have. ``devices``: what
    runs as each side (a test runs the CPU as both)."""
    from rt_lidar.physics.model import PhysicsConfig
    from rt_lidar.physics.weather import WeatherConfig
    from rt_lidar.pipeline.builder import build_pipeline
    from rt_lidar.sensor.beam import BeamConfig
    from rt_lidar.sensor.scan_pattern import scan_period_ns

    out: dict[str, Any] = {}
    for name in presets:
        runs: dict[str, Any] = {}
        points: dict[str, list[np.ndarray]] = {}
        for label, device in zip(("cpu", "cuda"), devices, strict=True):
            cfg = PhysicsConfig(
                weather=WeatherConfig(rain_mm_h=25.0),
                beam=BeamConfig(sub_rays=7, return_mode="dual"),
                kernels_device=device,
            )
            built = build_pipeline(name, "street", seed=0, physics=cfg)
            built.pipeline.scans(1)  # warm: kernels compiled, caches filled
            t = time.perf_counter()
            got = built.pipeline.scans(scans)
            wall = (time.perf_counter() - t) / scans
            period_s = scan_period_ns(built.preset) * 1e-9
            points[label] = [s.points for s in got]
            runs[label] = {"ms_per_scan": round(wall * 1e3, 1), "realtime_factor": round(period_s / wall, 3)}
        cpu_n = sum(p.size for p in points["cpu"])
        common = sum(
            np.intersect1d(_row_ids(a), _row_ids(b)).size
            for a, b in zip(points["cpu"], points["cuda"], strict=True)
        )
        out[name] = {
            **{f"{d}_{k}": v for d, r in runs.items() for k, v in r.items()},
            "speedup": round(runs["cpu"]["ms_per_scan"] / runs["cuda"]["ms_per_scan"], 2),
            "points_per_scan": cpu_n // scans,
            "cuda_points_matched_share": round(common / max(cpu_n, 1), 6),
        }
    return out


def _row_ids(points: np.ndarray) -> np.ndarray:
    """One int64 per point from its pulse (ring, firing time) and return number."""
    ring = points["ring"].astype(np.int64)
    t = points["t"].astype(np.int64)
    rid = points["return_id"].astype(np.int64)
    return (t * 256 + ring) * 4 + rid


def bench_rinet(frames: int) -> dict[str, Any]:
    """Each RINet runtime that can run: ms a frame (image in, masks out) and the difference from ORT CPU."""
    from rt_lidar.rinet.runtime import OnnxRuntimeBackend, bundled_model_path, runtimes_here

    model = bundled_model_path()
    ref = OnnxRuntimeBackend(model, providers=["CPUExecutionProvider"])
    img = np.random.default_rng(1).integers(0, 256, (360, 640, 3), dtype=np.uint8)
    want = ref.infer(img)
    out: dict[str, Any] = {}
    loaded, skipped = runtimes_here(model)
    for name, rt in loaded.items():
        for batch in (1, 8):
            small = np.asarray(Image.fromarray(img).resize((rt.width, rt.height), Image.Resampling.BILINEAR))
            x = np.repeat(
                np.ascontiguousarray(small.transpose(2, 0, 1)[None], np.float32) / np.float32(255.0), batch, 0
            )
            for _ in range(5):
                rt.infer(x)
            ms = []
            for _ in range(frames):
                rt.infer(x)
                ms.append(rt.last_ms)
            out[f"{name}@batch{batch}"] = {
                "provider": rt.provider,
                "median_ms": round(float(np.median(ms)), 3),
                "p99_ms": round(float(np.percentile(ms, 99)), 3),
            }
        got = rt.infer(img)
        diff = max(np.abs(g - w).max() for g, w in zip(got[:2], want[:2], strict=True))
        out[f"{name}@batch1"]["max_abs_diff_vs_ort_cpu"] = float(diff)
    return {"runtimes": out, "skipped": skipped}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=6, help="frames recorded per preset for the frame loop")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--scans", type=int, default=4, help="scans per preset and device for the pipeline part")
    ap.add_argument("--sizes", type=int, nargs="+", default=[131_072, 1_310_720])
    ap.add_argument("--presets", nargs="+", default=["HDL-64E", "VLS-128"])
    parts_all = ["weather", "frame_loop", "pipeline", "rinet"]
    ap.add_argument("--only", nargs="+", choices=parts_all, default=parts_all)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not cupy_available():
        print("bench_gpu: CuPy with a CUDA device is not available here", file=sys.stderr)
        return 2
    import cupy as cp

    result: dict[str, Any] = {"gpu": gpu_info(cp)}
    parts: dict[str, Callable[[], Any]] = {
        "weather": lambda: bench_weather(cp, args.sizes, args.repeat),
        "frame_loop": lambda: bench_frame_loop(cp, args.presets, args.frames, args.repeat),
        "pipeline": lambda: bench_pipeline_devices(args.presets, args.scans),
        "rinet": lambda: bench_rinet(args.repeat * 2),
    }
    for name in args.only:
        t = time.perf_counter()
        try:
            result[name] = parts[name]()
        except Exception as exc:  # one part failing must not lose the others' figures
            result[name] = {"error": f"{type(exc).__name__}: {exc}"}
        result[f"{name}_s"] = round(time.perf_counter() - t, 1)
        print(json.dumps({name: result[name]}, indent=1), flush=True)
    if args.out:
        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
