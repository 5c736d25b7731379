"""``--beam full`` against fixed sub-ray bundles and one ray a pulse: real-time factors of whole demos.

Run: .venv/bin/python tools/bench/bench_beam_full.py [--out docs/bench/beam_full.json] [--repeats 3]
     [--frames 10] [--only NAME,...] [--note TEXT]

Every configuration is one ``rt-lidar demo --in-process`` (its scans written as PCD + KITTI, as the
demo runs), seed 3 on the street; its real-time factor is the demo's own (summary.json: simulated
seconds over wall seconds of the scan loop). The configurations run in rounds, each once a round in
turn, so that a shared machine's drift shows as the range of each one's runs, not as a difference
between them. The rows:

- HDL-64E, dual returns, 25 mm/h rain: one ray a pulse, ``--sub-rays 7``, ``--beam full``, and the
  dense ``--sub-rays 19`` that ``--beam full`` stands for;
- VLS-128 dual returns: one ray a pulse and ``--beam full``;
- the example rig (docs/rigs/roof-and-corners.toml: an HDL-64E and two VLP-16s), without and with
  ``--crosstalk``;
- plain HDL-64E (strongest return, clear air: the frame loop the realism intensity chain costs most);
- the other rows of issue 43's table: HDL-64E plain and dual returns over the bridge, HDL-64E dual
  in-process, HDL-64E ``--beam full`` dual in rain over the bridge, VLS-128 over the bridge (names ending
  in ``_bridged`` run ``rt-lidar demo`` without ``--in-process``: the embedded server and the bridge).

The JSON keeps every run's factor, each row's range and median, each run's CPU seconds (the demo's
process and its children, every thread, start-up included) and the 1-minute load average after it,
``--beam full``'s share of pulses that got the bundle, and the machine (tools/bench/machine_record.py);
and each run's CPU time of the frame loop (every thread, from the loop's start to its last sink closed:
tools/bench/cpu_probe.py) per 1/20 s of sim time, which a shared machine's load moves far less than the
wall clock (a frame loop on two cores runs at most at 100 ms / that figure of real time).
``bench_beam_full_cpu.py`` gives the CPU time per sim frame of ``--beam full`` alone.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine_record import write_json  # tools/bench, beside this script

ROOT = Path(__file__).resolve().parents[2]
RIG = ROOT / "docs" / "rigs" / "roof-and-corners.toml"
HDL_RAIN = ["--preset", "HDL-64E", "--return-mode", "dual", "--rain", "25"]
VLS_DUAL = ["--preset", "VLS-128", "--return-mode", "dual"]
BRIDGED = "bridged"
"""A configuration whose arguments start with this runs over the bridge (``rt-lidar demo`` without
``--in-process``: the embedded server and the AirSim RPC bridge)."""
CONFIGS: dict[str, list[str]] = {
    "hdl64e_dual_rain25_single_ray": [*HDL_RAIN, "--sub-rays", "1"],
    "hdl64e_dual_rain25_sub_rays_7": [*HDL_RAIN, "--sub-rays", "7"],
    "hdl64e_dual_rain25_beam_full": [*HDL_RAIN, "--beam", "full"],
    "hdl64e_dual_rain25_sub_rays_19": [*HDL_RAIN, "--sub-rays", "19"],
    "vls128_dual_single_ray": [*VLS_DUAL, "--sub-rays", "1"],
    "vls128_dual_beam_full": [*VLS_DUAL, "--beam", "full"],
    "rig": ["--rig", str(RIG)],
    "rig_crosstalk": ["--rig", str(RIG), "--crosstalk"],
    "hdl64e_plain": ["--preset", "HDL-64E"],
    # the other rows of issue 43's table: dual returns, and over the bridge (the embedded server)
    "hdl64e_plain_bridged": [BRIDGED, "--preset", "HDL-64E"],
    "hdl64e_dual": ["--preset", "HDL-64E", "--return-mode", "dual"],
    "hdl64e_dual_bridged": [BRIDGED, "--preset", "HDL-64E", "--return-mode", "dual"],
    "hdl64e_dual_rain25_beam_full_bridged": [BRIDGED, *HDL_RAIN, "--beam", "full"],
    "vls128_bridged": [BRIDGED, "--preset", "VLS-128"],
}


BEFORE_SUFFIX = "_before"


def run_demo(args: list[str], frames: int, seed: int, code: Path | None = None) -> dict[str, Any]:
    """One in-process demo with ``args``; its summary.json's figures. ``code``: a checkout whose
    ``rt_lidar`` runs instead of this one (its compiled twins built in place)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(code if code is not None else ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        bridged = args[:1] == [BRIDGED]
        demo_args = args[1:] if bridged else ["--in-process", *args]
        probe = Path(tmp) / "cpu.json"
        cmd = [sys.executable, str(Path(__file__).with_name("cpu_probe.py")), str(probe), "demo", "--quiet"]
        cmd += ["--frames", str(frames), "--seed", str(seed), "--out", str(out), *demo_args]
        t0 = time.perf_counter()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=env)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        elapsed = time.perf_counter() - t0
        cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        summary = json.loads((out / "summary.json").read_text())
        loop_cpu = json.loads(probe.read_text())["loop_cpu_s"]
    sim_s = float(summary["sim_time_s"])
    got: dict[str, Any] = {
        "realtime_factor": float(summary["realtime_factor"]),
        "elapsed_s": elapsed,
        "cpu_s": cpu_s,  # the demo's process and its children, every thread, start-up included
        "load_average_1min": os.getloadavg()[0],
        "sim_time_s": sim_s,
        # CPU of every thread from the loop's start to the last sink closed, per 1/20 s of sim time
        "cpu_ms_per_sim_frame": None if loop_cpu is None else 1000.0 * loop_cpu / (sim_s * 20.0),
    }
    if "beam" in summary:
        got["beam"] = summary["beam"]
    if "points_per_scan_mean" in summary:
        got["points_per_scan_mean"] = summary["points_per_scan_mean"]
    return got


def summarise(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A row: every run's factor, their range and median, and the last run's beam section."""
    f = [round(r["realtime_factor"], 3) for r in runs]
    row: dict[str, Any] = {
        "config": name,
        "args": CONFIGS[name.removesuffix(BEFORE_SUFFIX)],
        "realtime_factor_runs": f,
        "realtime_factor_min": min(f),
        "realtime_factor_max": max(f),
        "realtime_factor_median": statistics.median(f),
        "cpu_s_runs": [round(r["cpu_s"], 2) for r in runs],
        "load_average_1min": [round(r["load_average_1min"], 2) for r in runs],
    }
    cpu = [r["cpu_ms_per_sim_frame"] for r in runs if r.get("cpu_ms_per_sim_frame") is not None]
    if cpu:
        row["cpu_ms_per_sim_frame_runs"] = [round(c, 1) for c in cpu]
        row["cpu_ms_per_sim_frame_median"] = round(statistics.median(cpu), 1)
    if "beam" in runs[-1]:
        row["beam"] = runs[-1]["beam"]
    if "points_per_scan_mean" in runs[-1]:
        row["points_per_scan_mean"] = runs[-1]["points_per_scan_mean"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=3, help="rounds: runs of each configuration")
    parser.add_argument("--frames", type=int, default=10, help="scans each demo writes")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated configurations (default: all)")
    parser.add_argument("--note", default="", help="a line on how the machine was used (e.g. shared)")
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        help="a checkout of the code before a change (compiled twins built in place): each configuration "
        "also runs with it, right before this checkout's run, as NAME" + BEFORE_SUFFIX,
    )
    args = parser.parse_args(argv)
    if args.before is not None:  # the runs start in other folders: a relative path would miss it
        args.before = args.before.resolve()
    names = [n for n in args.only.split(",") if n] or list(CONFIGS)
    unknown = set(names) - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configuration(s) {sorted(unknown)}; known: {', '.join(CONFIGS)}")
    order: list[tuple[str, Path | None]] = []
    for n in names:  # each configuration before the change, then after it, one right after the other
        if args.before is not None:
            order.append((n + BEFORE_SUFFIX, args.before))
        order.append((n, None))
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n, _ in order}
    for round_no in range(max(1, args.repeats)):
        for name, code in order:
            got = run_demo(CONFIGS[name.removesuffix(BEFORE_SUFFIX)], args.frames, args.seed, code)
            runs[name].append(got)
            share = got.get("beam", {}).get("bundled_share")
            extra = (
                f"  bundled {share:.1%}" if isinstance(share, float) and got["beam"]["mode"] == "full" else ""
            )
            cpu = got["cpu_ms_per_sim_frame"]
            cpu_txt = "" if cpu is None else f"  loop CPU {cpu:6.1f} ms/sim frame"
            print(
                f"round {round_no + 1} {name:>32}: RTF {got['realtime_factor']:5.2f}  "
                f"CPU {got['cpu_s']:5.2f} s{cpu_txt} (load {got['load_average_1min']:.1f}){extra}",
                flush=True,
            )
    report = {
        "frames": args.frames,
        "rounds": max(1, args.repeats),
        "seed": args.seed,
        "note": args.note,
        "before": None if args.before is None else str(args.before),
        "results": [summarise(n, runs[n]) for n, _ in order],
    }
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
