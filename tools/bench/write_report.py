"""Write docs/performance.md from the JSON the benchmarks left in docs/bench/ (run after `make bench`).

Run: .venv/bin/python tools/bench/write_report.py [--bench docs/bench] [--out docs/performance.md]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HEADER = """# Performance

Measured on a development machine: 2 cores (x86_64), 24 GB, no GPU, CPython 3.11, NumPy 2. Every
table below is written by `tools/bench/write_report.py` from the JSON that the scripts in
`tools/bench/` leave in `docs/bench/` (`make bench` runs them all); the tables are from the last run,
on machine B below. The cores are shared with other work, so expect +-30 % between runs; ratios are
measured within one run. The notes after the tables give ranges over repeated runs and name the
machine:

- **machine A**: the earlier sessions' 2-core x86_64 VM, without AVX-512;
- **machine B**: a 2-core AMD EPYC VM with AVX-512 (`lscpu`), 20-40 % faster on the frame loop and
  about twice as fast at painting points in llvmpipe.
"""


def _load(bench: Path, name: str) -> dict[str, Any] | None:
    path = bench / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _table(rows: list[list[str]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def pipeline(d: dict[str, Any]) -> str:
    rows = [
        ["preset", "rays/scan", "scan Hz", "M rays/s", "M points/s", "ms/scan", "RTF", "RTF with writers"]
    ]
    for r in d["results"]:
        rows.append(
            [
                r["preset"],
                f"{r['rays_per_scan']:,}",
                f"{r['scan_hz']:g}",
                f"{r['rays_per_s'] / 1e6:.2f}",
                f"{r['points_per_s'] / 1e6:.2f}",
                f"{r['ms_per_scan']:.0f}",
                f"{r['realtime_factor']:.2f}",
                f"{r['realtime_factor_with_writers']:.2f}",
            ]
        )
    return (
        "## Frame loop (`tools/bench/bench_pipeline.py`)\n\nIn-process (the world cast straight from the "
        "pipeline, next frame prefetched), embedded street, f_sim = 20 Hz, 10 scans after a warm-up. "
        'RTF = simulated seconds per wall second; "with writers" adds PCD + KITTI files written in line '
        "(the demo writes them from a background thread).\n\n" + _table(rows)
    )


def raycast(d: dict[str, Any]) -> str:
    rows = [["scene", "triangles", "build s", "M rays/s (133k rays)", "M rays/s (1M rays)"]]
    for name, r in d.items():
        rows.append(
            [
                name,
                f"{r['triangles']:,}",
                f"{r['scene_build_s'] + r['world_build_s']:.2f}",
                f"{r['rays_per_s_133k'] / 1e6:.2f}",
                f"{r['rays_per_s_1M'] / 1e6:.2f}",
            ]
        )
    return (
        "## Ray casting (`tools/bench/bench_raycast.py`)\n\nEmbree (embreex) through `World.cast`, static "
        "BVH plus moving cars, lidar-like fans from the sensor.\n\n" + _table(rows)
    )


def bridge(d: dict[str, Any]) -> str:
    rows = [
        ["", "ours", "stock airsim 1.8.1 (rpc-msgpack)", "stock / ours"],
        [
            "getLidarData, 100k points, end to end (median ms)",
            f"{d['ours_ms_median']:.1f}",
            f"{d['stock_ms_median']:.1f}",
            f"{d['ratio_stock_over_ours']:.1f}x",
        ],
        [
            "decode of the same answer bytes (median ms)",
            f"{d['ours_decode_ms_median']:.1f}",
            f"{d['stock_decode_ms_median']:.1f}",
            f"{d['decode_ratio_stock_over_ours']:.1f}x",
        ],
        [
            "decode to a NumPy array (median ms)",
            f"{d['ours_decode_ms_median']:.1f}",
            f"{d['stock_decode_to_numpy_ms_median']:.1f}",
            f"{d['decode_to_numpy_ratio_stock_over_ours']:.1f}x",
        ],
    ]
    if "server_and_transfer_ms_median" in d:
        rows.append(
            [
                "server work + loopback transfer alone (raw socket, no decoding; median ms)",
                f"{d['server_and_transfer_ms_median']:.1f}",
                "",
                "",
            ]
        )
    return (
        "## AirSim bridge (`tools/bench/bench_bridge.py`)\n\nOur client against the stock client (its own "
        f"venv) on the same server answer ({d['answer_bytes']:,} bytes, float32 point cloud).\n\n"
        + _table(rows)
    )


def weather(d: dict[str, Any]) -> str:
    rows = [
        [
            "case (131k points)",
            "kernel ms (best / median)",
            "M points/s (best / median)",
            "plain-Python reference points/s",
            "speed-up (best / median)",
        ]
    ]
    for name, r in d["results"].items():
        best = r.get("kernel_ms_best", r["kernel_ms_median"])
        pps_best = r.get("kernel_points_per_s_best", r["kernel_points_per_s_median"])
        rows.append(
            [
                name,
                f"{best:.1f} / {r['kernel_ms_median']:.1f}",
                f"{pps_best / 1e6:.1f} / {r['kernel_points_per_s_median'] / 1e6:.1f}",
                f"{r['reference_points_per_s']:,.0f}",
                f"{r.get('speedup_best', r['speedup_median']):.0f}x / {r['speedup_median']:.0f}x",
            ]
        )
    return (
        "## Weather kernels (`tools/bench/bench_weather.py`)\n\nBest of 15 kernel runs against the best of "
        "3 reference passes (and the medians), one process.\n\n" + _table(rows)
    )


def udp(d: dict[str, Any]) -> str:
    rows = [
        [
            "seconds",
            "packets received",
            "a real VLP-16 sends",
            "count error",
            "inter-arrival jitter p99",
            "sender lateness p99",
            "dropped late / full",
        ],
        [
            f"{d['seconds']:g}",
            f"{d['packets_received']:,}",
            f"{d['packets_real_sensor']:,.0f}",
            f"{d['count_error_pct']:+.3f} %",
            f"{d['interarrival_jitter_p99_us'] / 1e3:.2f} ms",
            f"{d['sender_lateness_p99_us'] / 1e3:.2f} ms",
            f"{d['sender_dropped_late']} / {d['sender_dropped_full']}",
        ],
    ]
    return (
        "## Hardware-in-the-loop UDP (`tools/bench/bench_udp.py --seconds 60`)\n\nVLP-16 packets paced to "
        f"wall-clock time (nominal gap {d['gap_nominal_us']:.1f} us) to a loopback listener.\n\n"
        + _table(rows)
    )


def viewer(d: dict[str, Any]) -> str:
    rows = [
        ["points", "publish Hz", "viewer fps", "latency sim->screen p50 / p95 ms", "dropped", "publish ms"]
    ]
    for r in d["results"]:
        rows.append(
            [
                f"{r['points']:,}",
                f"{r['publish_hz']:g}",
                f"{r['viewer_fps']:.1f}",
                f"{r['latency_ms_p50']:.0f} / {r['latency_ms_p95']:.0f}",
                str(r["dropped_frames"]),
                f"{r['publish_ms_mean']:.1f} (no subscriber {r['publish_ms_no_subscriber']:.1f})",
            ]
        )
    return (
        "## Viewer (`tools/bench/bench_viewer.py`)\n\npyqtgraph GL under Xvfb (Mesa llvmpipe), 1024x768, fed "
        "over ZeroMQ; the publisher never waits for it (frames it cannot take are dropped and counted).\n\n"
        + _table(rows)
    )


def rinet(d: dict[str, Any]) -> str:
    rows = [
        [
            "runtime",
            "provider",
            "model input",
            "model run ms p50",
            "infer ms p50",
            "stage ms p50 (127k points)",
        ]
    ]
    for name, r in d["runtimes"].items():
        rows.append(
            [
                name,
                r["provider"],
                "x".join(str(v) for v in r["model_input"][::-1]),
                f"{r['model_run_ms']['p50']:.1f}",
                f"{r['infer_ms']['p50']:.1f}",
                f"{r['stage_ms']['p50']:.0f}",
            ]
        )
    skipped = "; ".join(f"{k}: {v}" for k, v in d.get("skipped", {}).items())
    return (
        "## RINet inference (`tools/bench/bench_rinet.py`)\n\n"
        + _table(rows)
        + (f"\n\nNot measured here: {skipped}." if skipped else "")
    )


def waveform(d: dict[str, Any]) -> str:
    rows = [
        [
            "pulses",
            "sub-rays",
            "rays cast",
            "cast s",
            "waveform kernel s",
            "M sub-rays/s",
            "physics s (waveform)",
            "physics s (single ray)",
        ],
        [
            f"{d['pulses']:,}",
            str(d["sub_rays"]),
            f"{d['rays']:,}",
            f"{d['cast_s']:.2f}",
            f"{d['waveform_kernel_s']:.2f}",
            f"{d['waveform_kernel_msubrays_per_s']:.2f}",
            f"{d['physics_waveform_s']:.2f}",
            f"{d['physics_single_ray_s']:.3f}",
        ],
    ]
    return f"## Sub-ray waveforms (`tools/bench/bench_waveform.py`, {d['preset']})\n\n" + _table(rows)


def generate(d: dict[str, Any]) -> str:
    rows = [["workers", "runs", "frames", "wall s", "frames/s"]]
    for w, r in d["results"].items():
        rows.append([w, str(r["runs"]), str(r["frames"]), f"{r['wall_s']:.2f}", f"{r['frames_per_s']:.1f}"])
    return (
        f"## Dataset generation on Ray (`tools/bench/bench_generate.py`, {d['preset']}, {d['scene']})\n\n"
        + _table(rows)
        + f"\n\nScaling from 1 to 2 workers: {d['scaling']:.2f}x "
        f"(Ray start-up, {d['ray_start_s']:.1f} s, not counted)."
    )


SECTIONS = [
    ("pipeline", pipeline),
    ("raycast", raycast),
    ("bridge", bridge),
    ("weather", weather),
    ("waveform", waveform),
    ("udp", udp),
    ("viewer", viewer),
    ("rinet", rinet),
    ("generate", generate),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", type=Path, default=Path("docs/bench"))
    ap.add_argument("--out", type=Path, default=Path("docs/performance.md"))
    ap.add_argument(
        "--extra",
        type=Path,
        default=Path("docs/performance-notes.md"),
        help="hand-written notes appended as they are",
    )
    args = ap.parse_args(argv)
    parts = [HEADER]
    for name, fn in SECTIONS:
        d = _load(args.bench, name)
        parts.append(fn(d) if d else f"## {name}\n\nNo `{name}.json` in {args.bench}: run `make bench`.")
    if args.extra.exists():
        parts.append(args.extra.read_text().strip())
    args.out.write_text("\n\n".join(parts) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
