"""Write docs/performance.md from the JSON the benchmarks left in docs/bench/ (run after `make bench`).

Run: .venv/bin/python tools/bench/write_report.py [--bench docs/bench] [--out docs/performance.md]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from machine_record import summary  # tools/bench, beside this script

ROOT = Path(__file__).resolve().parents[2]

HEADER = """# Performance

Every table below is written by `tools/bench/write_report.py` from the JSON that the scripts in
`tools/bench/` leave in `docs/bench/` (`make bench` runs them all), and each ends with the machine its
run recorded (`tools/bench/machine_record.py`: CPU model and generation, logical CPUs, SIMD, kernel,
Python, NumPy). All but the last (the GPU's) are 2-core x86_64 VMs with 24 GB and no GPU, CPython
3.11, NumPy 2, at times shared with other work (each table's machine line gives its run's load
average): expect +-30 % between runs, and compare ratios within one run.
The hand-written notes after the tables give ranges over repeated runs and name their machine:

- **machine A**: the first sessions' 2-core x86_64 VM, without AVX-512;
- **machine B**: a 2-core AMD EPYC VM with AVX-512, 20-40 % faster on the frame loop and about twice
  as fast at painting points in llvmpipe;
- **machine C**: the VM of the sessions since 2 December's evening and of CI, an AMD EPYC of the
  Zen 3 generation (family 25, model 1) with 2 vCPUs, AVX2 and no AVX-512, under Firecracker (KVM).
  Its speed drifts by 30-40 % within minutes to hours;
- **machine D**: the VM of the session of 4 December's evening, an AMD EPYC of the Zen 4 generation
  (family 25, model 17) with 2 vCPUs (one thread a core), AVX-512, under Firecracker: the frame loop
  runs 1.3-1.6x machine C's rates. Every table above the notes but the GPU's was run on it (their
  machine lines say so); tables whose JSON predates the machine record say so.
"""


def _load(bench: Path, name: str) -> dict[str, Any] | None:
    path = bench / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def machine_note(d: dict[str, Any]) -> str:
    """The line that ends a table: the machine its JSON recorded, or that it recorded none."""
    m = d.get("machine")
    if isinstance(m, dict) and "logical_cpus" in m:
        return f"Machine: {summary(m)}."
    return "Machine: not recorded (a run from before the benchmarks recorded it; see the list above)."


def _table(rows: list[list[str]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def _best_and_range(r: dict[str, Any], key: str) -> str:
    """'highest (lowest-highest)' over a preset's runs where the JSON has them, else the one figure."""
    runs = r.get(f"{key}_runs")
    if runs and len(runs) > 1:
        return f"{max(runs):.2f} ({min(runs):.2f}-{max(runs):.2f})"
    return f"{r[key]:.2f}"


def pipeline(d: dict[str, Any]) -> str:
    rows = [
        ["preset", "rays/scan", "scan Hz", "M rays/s", "M points/s", "ms/scan", "RTF", "RTF with writers"]
    ]
    fast = all("realtime_factor_embree_fast" in r for r in d["results"])
    if fast:
        rows[0].append("RTF, `--caster embree-fast`")
    for r in d["results"]:
        rows.append(
            [
                r["preset"],
                f"{r['rays_per_scan']:,}",
                f"{r['scan_hz']:g}",
                f"{r['rays_per_s'] / 1e6:.2f}",
                f"{r['points_per_s'] / 1e6:.2f}",
                f"{r['ms_per_scan']:.0f}",
                _best_and_range(r, "realtime_factor"),
                _best_and_range(r, "realtime_factor_with_writers"),
                *([_best_and_range(r, "realtime_factor_embree_fast")] if fast else []),
            ]
        )
    rounds = d.get("rounds")
    how = (
        f"The presets ran in {rounds} rounds, each preset once a round with each caster in turns: the "
        "rates are each preset's fastest run, each factor its highest, and in brackets the range of its "
        "runs (the VM's drift over the benchmark). "
        if rounds and rounds > 1
        else "One run of each (the best of each caster's runs kept). "
    )
    return (
        "## Frame loop (`tools/bench/bench_pipeline.py`)\n\nIn-process (the world cast straight from the "
        "pipeline, three frames cast ahead at the same time, one thread each, as the demo runs), "
        f"embedded street, f_sim = 20 Hz, {d['results'][0]['scans']} scans after a warm-up. "
        'RTF = simulated seconds per wall second; "with writers" adds PCD + KITTI files written in line '
        "(the demo writes them from a background thread); the last column, where given, is the "
        f"pipeline alone with the `embree-fast` caster. {how}On the 2-core Zen 3 VM (machine C) a "
        "preset's figure moved by 30-40 % with the VM's speed (HDL-64E 1.8-3.6x over the runs of "
        "3-4 December; 3.7-4.4x on machine D), so compare presets within the table, and code against "
        "code in alternating runs (docs/performance-notes.md).\n\n" + _table(rows)
    )


def raycast(d: dict[str, Any]) -> str:
    rows = [["scene", "triangles", "build s", "M rays/s (133k rays)", "M rays/s (1M rays)"]]
    for name, r in d.items():
        if name == "machine":  # tools/bench/machine_record.py's record beside the scenes
            continue
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


def _load_note(d: dict[str, Any]) -> str:
    """The run's load average (its own processes included) and the command that made it."""
    la = d.get("load_average")
    load = f"a load average of {la[0]:.1f} on {d.get('cpus', 2)} cores" if la else "the load not recorded"
    command = d.get("command", "").replace(f"{ROOT}/", "")
    return f"Taken with {load} (the run's own processes included): `{command}`."


def shm_transfer(d: dict[str, Any]) -> str:
    rows = [["transport", "median ms", "p10 ms", "p90 ms"]]
    for t in ("tcp", "shm"):
        rows.append(
            [
                "TCP (msgpack on loopback)" if t == "tcp" else "shared memory (`--shm`)",
                f"{d[f'{t}_ms_median']:.1f}",
                f"{d[f'{t}_ms_p10']:.1f}",
                f"{d[f'{t}_ms_p90']:.1f}",
            ]
        )
    return (
        f"## Same-host fast path (`tools/bench/bench_shm_transfer.py`, {d['preset']})\n\n"
        f"`rtLidarGetHits` from request to decoded arrays against a server replaying recorded street "
        f"answers (nothing cast; each answer encoded per call): {d['rays_per_frame']:,} rays, "
        f"{d['bytes_per_frame_fields'] / 1e6:.1f} MB of per-ray fields a sim frame, "
        f"{d['calls_per_transport']} calls each way, alternating. Shared memory / TCP: "
        f"{d['speedup_median']:.2f}x faster; answers identical both ways: {d['identical_answers']}.\n\n"
        + _table(rows)
        + "\n\n"
        + _load_note(d)
    )


def controller_cost(d: dict[str, Any], shm: dict[str, Any] | None = None) -> str:
    rows = [
        [
            "preset",
            "transport",
            "rays",
            "M rays/s (wall)",
            "M points/s (wall)",
            "M points/s (CPU)",
            "RTF (wall)",
        ]
    ]
    for src in (d, shm):
        for r in (src or {}).get("rows", []):
            rows.append(
                [
                    r["preset"],
                    r["transport"],
                    f"{r['rays']:,}",
                    f"{r['M_rays_per_s_wall']:.2f}",
                    f"{r['M_points_per_s_wall']:.2f}",
                    f"{r['M_points_per_s_cpu']:.2f}",
                    f"{r['real_time_factor_wall']:.2f}",
                ]
            )
    return (
        "## The controller's own cost on one core (`tools/bench/bench_controller_cost.py`)\n\n"
        "What a user with Unreal on its own machine gets: the server answers instantly (one rotation of "
        "the street recorded, replayed prepacked from its own process on the other core); the controller, "
        f"pinned to one core, decodes, runs the physics with rain {d['rain_mm_h']:g} mm/h, sweeps whole "
        f'scans and writes them to one sink ({d["sink"]}). "CPU" divides by the controller process\'s '
        'CPU time, the figure a quiet core would give; "wall" is what it got on the loaded core.\n\n'
        + _table(rows)
        + "\n\n"
        + _load_note(d)
    )


def profile(d: dict[str, Any]) -> str:
    names = {
        "server_cast": "server cast (+ hits_to_wire)",
        "pack": "pack (encode_hits + rpc.pack; shm: fields into the segment)",
        "transfer": "transfer (loopback TCP)",
        "decode": "decode (fast_decode + decode_hits)",
        "hits_from_wire": "hits_from_wire",
        "physics": "physics",
        "sweep": "sweep (assembler)",
        "sinks": "sinks (PCD + KITTI, per frame)",
        "total": "total",
    }
    wall, cpu = d["stage_ms_median"], d["stage_cpu_ms_median"]
    rows = [["stage", "TCP ms (wall / CPU)", "shared memory ms (wall / CPU)"]]
    for k, label in names.items():
        rows.append(
            [
                label,
                f"{wall['tcp'][k]:.1f} / {cpu['tcp'][k]:.1f}",
                f"{wall['shm'][k]:.1f} / {cpu['shm'][k]:.1f}",
            ]
        )
    return (
        f"## One bridged {d['preset']} frame, stage by stage (`tools/bench/profile_bridged_frame.py`)\n\n"
        f"Medians over {d['frames']} sim frames of the street ({d['rays_per_frame_median']:,.0f} rays each), "
        "every stage run by the function the bridge runs, one after the other in one process (in the real "
        "loop the server's cast overlaps the controller's work). Before = TCP, after = the same-host "
        f"shared-memory path; the decoded hits are identical: {d['identical_hits']}. CPU = this process's "
        "CPU time (every thread: the cast uses several).\n\n" + _table(rows) + "\n\n" + _load_note(d)
    )


def decode(d: dict[str, Any]) -> str:
    rows = [
        ["answer (100k points)", "bytes", "ours ms", "stock decode ms", "stock to NumPy ms", "stock / ours"]
    ]
    for case, label in (("mixed", "msgpack-c ids 0..255 and -1 mixed"), ("uniform", "all ids < 128")):
        r = d[case]
        rows.append(
            [
                label,
                f"{r['answer_bytes']:,}",
                f"{r['ours_ms_median']:.2f} / {r['ours_ms_min']:.2f}",
                f"{r.get('stock_decode_ms_median', float('nan')):.1f}",
                f"{r.get('stock_decode_to_numpy_ms_median', float('nan')):.1f}",
                f"{r.get('ratio_stock_to_numpy_over_ours', float('nan')):.1f}x",
            ]
        )
    return (
        "## Decoding AirSim's own answers (`tools/bench/bench_decode.py`)\n\n"
        "`getLidarData` answers packed as AirSim's C++ server packs them (float32 points; segmentation ids "
        "in msgpack-c's smallest forms), decoded to NumPy by our client and by the stock `airsim` 1.8.1 "
        f"client (peer venv), medians of {d['reps']} runs each. Mixed / uniform (ours): "
        f"{d['mixed_over_uniform']:.2f}x.\n\n" + _table(rows) + "\n\n" + _load_note(d)
    )


def profile_inprocess(d: dict[str, Any]) -> str:
    presets = d["presets"]
    names = list(presets)
    labels = {
        "cast": "cast (firings + WorldSource.hits, one thread)",
        "physics": "physics",
        "sweep": "sweep (assembler)",
        "sinks": "sinks (PCD + KITTI, per frame)",
        "total": "total",
    }
    rows = [["stage (CPU ms a sim frame, mean)", *names]]
    for k, label in labels.items():
        rows.append([label, *(f"{presets[n]['stage_cpu_ms_mean'][k]:.1f}" for n in names)])
    rows.append(["rays a frame (median)", *(f"{presets[n]['rays_per_frame_median']:,.0f}" for n in names)])
    cores = d["cores"]
    rows.append(
        [
            f"ceiling on {cores} busy cores (x real time)",
            *(f"{presets[n]['budget']['ceiling']:.2f}" for n in names),
        ]
    )
    need = presets[names[0]]["budget"]["cpu_ms_for"]
    for f, v in need.items():
        rows.append([f"CPU ms a frame that {f} needs", *(f"{v:.1f}" for _ in names)])
    if all("run" in presets[n] for n in names):
        run = {n: presets[n]["run"] for n in names}
        rows.append(
            [
                "frame loop as the demo runs it, no writers (x real time)",
                *(f"{run[n]['realtime_factor']:.2f}" for n in names),
            ]
        )
        rows.append(
            ["its CPU ms a frame (every thread)", *(f"{run[n]['cpu_ms_per_frame']:.1f}" for n in names)]
        )
        rows.append(
            ["its CPU / the stages' one at a time", *(f"{run[n]['cpu_vs_stages_alone']:.2f}" for n in names)]
        )
        rows.append(["the cores' time it kept busy", *(f"{run[n]['cores_busy']:.0%}" for n in names)])
    return (
        "## One in-process frame, stage by stage, and the factor its CPU allows "
        "(`tools/bench/profile_inprocess_frame.py`)\n\n"
        "CPU time of each stage of `rt-lidar demo --in-process` (street, 20 Hz sim frames) over "
        f"{d['frames']} frames, run one after the other in one thread. The demo runs them on several "
        "threads at once (frames cast ahead, the sinks' thread), so its real-time factor is at best the "
        "ceiling: the cores' time a frame divided by the CPU a frame costs. The frame loop run as the demo "
        "runs it, over the same frames, shows how close the threads come to that bound.\n\n"
        + _table(rows)
        + "\n\n"
        + _load_note(d)
    )


def _kernel(d: dict[str, Any]) -> str:
    """The kernel a run recorded: in its machine record, or (older JSON) beside it."""
    m = d.get("machine")
    return str(m["kernel"]) if isinstance(m, dict) and "kernel" in m else str(d.get("kernel", "?"))


def page_cache(d: dict[str, Any]) -> str:
    med = d["median"]
    rows = [["CPU ms a file", "drop-behind (default)", "kept (`RT_LIDAR_KEEP_PAGE_CACHE=1`)", "kept / drop"]]
    for k, label in (("vm_busy_ms_per_file", "the whole VM's"), ("writer_cpu_ms_per_file", "the writer's")):
        ratio = d["keep_over_drop"][k]
        shown = "-" if ratio is None else f"{ratio:.2f}"
        rows.append([label, f"{med['drop'][k]:.2f}", f"{med['keep'][k]:.2f}", shown])
    drained = (
        f"touched free pages taken first ({d['drain_held_gb']:.1f} GB held), as on a fresh machine"
        if d["drained"]
        else "on whatever pages the kernel had free"
    )
    return (
        "## Writing scans: the page cache let go of behind the writer (`tools/bench/bench_page_cache.py`)\n\n"
        f"{d['files']} files of {d['mb_per_file']:g} MB through `atomic_write`, 30 ms apart, each mode in a "
        f"fresh process, alternating ({len(d['runs'])} runs, medians), {drained}; kernel {_kernel(d)}.\n\n"
        + _table(rows)
    )


def gpu(d: dict[str, Any]) -> str:
    """The CUDA machine's section: the weather kernel, a frame loop's kernels, RINet on the GPU."""
    g = d["gpu"]
    head = (
        f"{g['name']} (compute capability {g['compute_capability']}, {g['multiprocessors']} SMs, "
        f"{g['memory_gib']:g} GiB), CUDA runtime {g['cuda_runtime']}, CuPy {g['cupy']}"
    )
    w_rows = [
        [
            "case @ rays",
            "NumPy ms",
            "CUDA kernel ms",
            "with copies ms",
            "x (kernel)",
            "x (copies)",
            "same outcome",
        ]
    ]
    for name, r in d.get("weather", {}).items():
        if name == "error":
            continue
        w_rows.append(
            [
                f"{name.split('@')[0]} @ {r['rays']:,}",
                f"{r['numpy_ms']:.2f}",
                f"{r['cuda_kernel_ms']:.3f}",
                f"{r['cuda_with_copies_ms']:.2f}",
                f"{r['speedup_kernel']:.0f}",
                f"{r['speedup_with_copies']:.1f}",
                f"{r['same_outcome_share']:.4%}",
            ]
        )
    loop = d.get("frame_loop", {})
    names = [n for n in loop if n != "error"]
    f_rows = [["a frame (rain 25 mm/h, dual returns, 7 sub-rays)", *names]]
    fields = [
        ("points a frame", "points_per_frame", "{:,.0f}"),
        ("rays through the weather kernel a frame", None, ""),
        (
            "CPU pipeline ms a frame (cast + physics, NumPy, while recorded)",
            "cpu_pipeline_ms_per_frame",
            "{:.0f}",
        ),
        ("its per-ray kernels on NumPy, ms", "kernels_numpy_ms_per_frame", "{:.0f}"),
        ("the same on CUDA with copies in and out, ms", "kernels_cuda_ms_per_frame", "{:.1f}"),
        ("speed-up of the kernels", "speedup", "{:.1f}x"),
        ("weather outcomes equal", "weather_same_outcome_share", "{:.4%}"),
        ("returns equal (pulse, number, time within 0.01 ns)", "waveform_returns_matched_share", "{:.4%}"),
    ]
    for label, key, fmt in fields:
        if key is None:
            f_rows.append([label, *(f"{loop[n]['weather_rays'] // loop[n]['frames']:,}" for n in names)])
        else:
            f_rows.append([label, *(fmt.format(loop[n][key]) for n in names)])
    pipe = {k: v for k, v in d.get("pipeline", {}).items() if k != "error"}
    p_rows = [["preset", "points a scan", "CPU ms a scan (x real time)", "CUDA ms a scan (x real time)"]]
    p_rows[0] += ["speed-up", "points also in the CUDA scans"]
    for name, r in pipe.items():
        p_rows.append(
            [
                name,
                f"{r['points_per_scan']:,}",
                f"{r['cpu_ms_per_scan']:.0f} ({r['cpu_realtime_factor']:.2f})",
                f"{r['cuda_ms_per_scan']:.0f} ({r['cuda_realtime_factor']:.2f})",
                f"{r['speedup']:.2f}x",
                f"{r['cuda_points_matched_share']:.4%}",
            ]
        )
    pipe_text = (
        "\n\nThe frame loop itself with those kernels on the GPU (`--kernels-device cuda`; casting and the "
        "rest on one CPU thread), the same frames as with `cpu`:\n\n" + _table(p_rows)
        if pipe
        else ""
    )
    rin = d.get("rinet", {})
    r_rows = [["runtime @ batch", "provider", "ms p50", "ms p99", "largest difference from ONNX Runtime CPU"]]
    for name, r in rin.get("runtimes", {}).items():
        diff = r.get("max_abs_diff_vs_ort_cpu")
        r_rows.append(
            [
                name,
                r["provider"],
                f"{r['median_ms']:.2f}",
                f"{r['p99_ms']:.2f}",
                "-" if diff is None else f"{diff:.1e}",
            ]
        )
    skipped = "; ".join(f"{k}: {v}" for k, v in rin.get("skipped", {}).items())
    return (
        "## The GPU paths on a CUDA machine (`tools/gpu_check.sh`, `tools/bench/bench_gpu.py`)\n\n"
        f"{head}. Not part of `make bench` (no machine here has a GPU): `tools/gpu_check.sh` runs the kernel "
        "tests' CuPy backend and this benchmark where CuPy sees a CUDA device. The machine line below is "
        "that machine's host.\n\n"
        "The fused weather kernel against the NumPy model, on `bench_weather`'s synthetic rays:\n\n"
        + _table(w_rows)
        + "\n\nA frame loop's per-ray kernels: real frames of the embedded street made by the CPU pipeline, "
        "every call of the weather model and of the echo waveform's returns recorded, then replayed on "
        "NumPy and on CuPy (copies to and from the GPU included). Casting stays on the CPU.\n\n"
        + _table(f_rows)
        + pipe_text
        + "\n\nRINet on the camera image (the bundled model, resized input, outputs back on the host):\n\n"
        + _table(r_rows)
        + (f"\n\nNot measured: {skipped}." if skipped else "")
        + (f"\n\nThe run: {d['note']}." if d.get("note") else "")
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
    ("shm_transfer", shm_transfer),
    ("controller_cost", controller_cost),
    ("profile_bridged_frame", profile),
    ("profile_inprocess_frame", profile_inprocess),
    ("decode", decode),
    ("page_cache", page_cache),
    ("gpu", gpu),
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
        if not d:
            how = "run `tools/gpu_check.sh` on a CUDA machine" if name == "gpu" else "run `make bench`"
            parts.append(f"## {name}\n\nNo `{name}.json` in {args.bench}: {how}.")
            continue
        if name == "controller_cost":
            section = controller_cost(d, _load(args.bench, "controller_cost_shm"))
        else:
            section = fn(d)
        parts.append(section.rstrip() + "\n\n" + machine_note(d))
    if args.extra.exists():
        parts.append(args.extra.read_text().strip())
    args.out.write_text("\n\n".join(parts) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
