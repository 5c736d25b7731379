"""The summary of one tools/gpu_check.sh run: gpu_check.json beside the files it read.

Reads ``preflight.json`` (tools/bench/gpu_preflight.py), ``gpu_frame_device.json``, ``gpu_frame.json`` and
``gpu_frame_extras.json`` (tools/bench/bench_gpu_frame.py's scenarios), ``skipped.txt`` and the steps'
exit codes (125: skipped, out of the check's time budget; 124: stopped at its limit), and writes the numbers
issue 43 asks for with the targets beside them: the four-VLS-128 rig with ``--beam full``, dual returns
and 25 mm/h rain, and the same with one ray a pulse, each as the device-resident frame: rays per second
and real-time factor (targets >= 100 M rays/s, >= 10x real time on one H100), the copies, and the device
scans' statistics against the CPU's (points a scan, range and intensity medians, second-return and rain
shares, blooming and the share of pulses bundled), and with sunlight, a wet road and crosstalk also each
sensor's false alarms, wet-road ghosts, rain/spray and crosstalk false points a scan. Where the device
could not run, ``device_error`` says why and the CPU's own statistics stand in its rows' place
(``*_cpu_statistics``).

Run: python tools/bench/gpu_check_summary.py OUT_DIR [step=rc ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TARGET_M_RAYS_PER_S = 100.0
TARGET_REALTIME_FACTOR = 10.0
STAT_KEYS = (
    "points_per_scan",
    "median_range_m",
    "median_intensity",
    "second_return_share",
    "rain_share",
    "bloom_share",
)
EXTRA_KEYS = ("false_alarms_per_scan", "ghosts_per_scan", "rain_or_spray_per_scan", "crosstalk_per_scan")
"""The sunlight, wet road and crosstalk scenario's statistics besides :data:`STAT_KEYS`."""


def _row(frame: dict[str, Any], device: str) -> dict[str, Any]:
    dev = frame.get(device, {})
    keys = ("realtime_factor", "M_rays_per_s", "rays_cast", "physics", "transfers", "bundled_share")
    row = {k: dev.get(k) for k in keys}
    cpu = frame.get("cpu", {})
    row["cpu_realtime_factor"] = cpu.get("realtime_factor")
    row["cpu_M_rays_per_s"] = cpu.get("M_rays_per_s")
    if "bundled_share" in cpu:
        row["cpu_bundled_share"] = cpu["bundled_share"]
    row["meets_100M_rays_per_s"] = (row["M_rays_per_s"] or 0) >= TARGET_M_RAYS_PER_S
    row["meets_10x_realtime"] = (row["realtime_factor"] or 0) >= TARGET_REALTIME_FACTOR
    return row


def _statistics(stats: dict[str, Any], keys: tuple[str, ...] = STAT_KEYS) -> dict[str, Any]:
    return {
        name: {k: s["difference"].get(k) for k in keys if k in s["difference"]} for name, s in stats.items()
    }


def summary(out: Path, rcs: dict[str, int]) -> dict[str, Any]:
    """What gpu_check.json holds (module docstring)."""
    got: dict[str, Any] = {"exit_codes": rcs}
    if (out / "preflight.json").exists():
        got["preflight"] = json.loads((out / "preflight.json").read_text())
    if (out / "skipped.txt").exists():
        got["skipped"] = (out / "skipped.txt").read_text().splitlines()
    report: dict[str, Any] = {}
    steps = (
        ("gpu_frame_device.json", "device_frame"),
        ("gpu_frame.json", "full_frame"),
        ("gpu_frame_extras.json", "sun_wet_crosstalk"),
    )
    for name, step in steps:
        path = out / name
        if path.exists():
            report.update(json.loads(path.read_text()))
        elif step in rcs:  # a step that ran and left no report
            got.setdefault("missing", []).append(f"{name}: tools/bench/bench_gpu_frame.py did not finish")
    if not report:
        return got
    device = report.get("device") or ("cuda" if "gpu" in report else "cuda-source-on-cpu")
    got.update(gpu=report.get("gpu"), device=device, rig=report["rig"], dry_run=report.get("dry_run", False))
    if "device_error" in report:
        got["device_error"] = report["device_error"]
    if "device_frame" in report:
        sec = report["device_frame"]
        got["dual_rain_device_frame"] = _row(sec.get("frame", {}), device)
        if "scan_statistics" in sec:
            got["dual_rain_device_minus_cpu"] = _statistics(sec["scan_statistics"])
        elif "scan_statistics_cpu" in sec:
            got["dual_rain_cpu_statistics"] = sec["scan_statistics_cpu"]
    if "sun_wet_crosstalk" in report:
        sec = report["sun_wet_crosstalk"]
        got["sun_wet_crosstalk_device_frame"] = _row(sec.get("frame", {}), device)
        if "scan_statistics" in sec:
            got["sun_wet_crosstalk_device_minus_cpu"] = _statistics(
                sec["scan_statistics"], STAT_KEYS + EXTRA_KEYS
            )
            got["sun_wet_crosstalk_cpu"] = {
                name: {k: s["cpu"].get(k) for k in EXTRA_KEYS} for name, s in sec["scan_statistics"].items()
            }
        elif "scan_statistics_cpu" in sec:
            got["sun_wet_crosstalk_cpu_statistics"] = sec["scan_statistics_cpu"]
    if "frame" in report:
        got["beam_full_dual_rain"] = _row(report["frame"], device)
        if "scan_statistics" in report:
            got["beam_full_device_minus_cpu"] = _statistics(report["scan_statistics"])
        elif "scan_statistics_cpu" in report:
            got["beam_full_cpu_statistics"] = report["scan_statistics_cpu"]
        if "cast" in report:
            got["cast"] = report["cast"]
    return got


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    rcs = {k: int(v) for k, v in (a.split("=", 1) for a in argv[1:])}
    got = summary(out, rcs)
    (out / "gpu_check.json").write_text(json.dumps(got, indent=2) + "\n")
    print(json.dumps(got, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
