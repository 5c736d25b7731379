"""tools/bench/bench_gpu_frame.py (the --device frame benchmark of tools/gpu_check.sh): without a GPU it
says so and still records the CPU's figures, and with the CUDA source built for the CPU its parts run end
to end on a one-sensor rig, so a GPU run finds no broken plumbing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rt_lidar.kernels.xp import cupy_available

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "bench"))

import bench_gpu_frame  # noqa: E402  (tools/bench)

ONE_VLP16 = """
[[sensor]]
name = "roof"
preset = "VLP-16"
mount = { xyz = [0.0, 0.0, 1.9], rpy_deg = [0.0, 0.0, 0.0] }
phase_deg = 0.0
sinks = []
"""


@pytest.mark.skipif(cupy_available(), reason="a CUDA device is here")
def test_without_a_gpu_it_records_the_cpu_figures_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "frame.json"
    assert bench_gpu_frame.main(["--device", "cuda", "--dry-run", "--out", str(out)]) == 3
    assert "needs CuPy and a CUDA device" in capsys.readouterr().err
    report = json.loads(out.read_text())
    assert "needs CuPy and a CUDA device" in report["device_error"]
    for section in (report, report["device_frame"]):  # --beam full, then one ray a pulse
        assert section["frame"]["cpu"]["realtime_factor"] > 0 and "cuda" not in section["frame"]
        assert section["scan_statistics_cpu"]["roof"]["points_per_scan"] > 10_000
    assert report["frame"]["cpu"]["bundled_share"]["roof"] > 0.02
    # asked for the device alone, there is nothing to record: a wrong request, exit 2
    assert bench_gpu_frame.main(["--device", "cuda", "--dry-run", "--skip-cpu-frame"]) == 2


def test_cpu_build_of_the_source_runs_every_part(tmp_path: Path) -> None:
    rig = tmp_path / "rig.toml"
    rig.write_text(ONE_VLP16)
    out = tmp_path / "frame.json"
    args = ["--device", "cuda-source-on-cpu", "--rig", str(rig), "--frames", "2", "--repeat", "1"]
    assert bench_gpu_frame.main([*args, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["rig"]["sensors"] == ["VLP-16"] and "machine" in report
    for side in ("cpu", "cuda-source-on-cpu"):
        frame = report["frame"][side]
        assert frame["sim_frames"] == 2 and frame["rays_cast"] > 0 and frame["realtime_factor"] > 0
    stats = report["scan_statistics"]["roof"]
    assert stats["cpu"]["points_per_scan"] > 10_000 and stats["cpu"]["second_return_share"] > 0
    # the device draws its own noise (docs/gpu.md's tolerances: points within 0.5 %)
    assert abs(stats["difference"]["points_per_scan"]) <= 0.005 * stats["cpu"]["points_per_scan"]
    assert abs(stats["difference"]["second_return_share"]) <= 0.002
    shares = [report["frame"][side]["bundled_share"]["roof"] for side in ("cpu", "cuda-source-on-cpu")]
    assert shares[0] > 0.02 and abs(shares[1] - shares[0]) <= 0.002  # the probe on both (docs/gpu.md)
    assert abs(stats["difference"]["bloom_share"]) <= 0.002
    cast = report["cast"]
    assert cast["rays"] > 0 and cast["same_hit_share"] > 0.999 and cast["moving_objects"] == 3
    assert cast["kernel_only_M_rays_per_s"] > 0 and cast["embree_M_rays_per_s"] > 0


def test_dry_run_times_the_device_resident_frame_against_the_cpus(tmp_path: Path) -> None:
    out = tmp_path / "dry.json"
    args = ["--device", "cuda-source-on-cpu", "--dry-run", "--scenario", "dual-rain"]
    assert bench_gpu_frame.main([*args, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["dry_run"] and "frame" not in report  # --beam full's row not asked for
    frame = report["device_frame"]["frame"]
    dev = frame["cuda-source-on-cpu"]
    assert dev["physics"] == "device" and frame["cpu"]["physics"] == "host"
    assert dev["rays_cast"] > 0 and dev["realtime_factor"] > 0 and dev["M_rays_per_s"] > 0
    assert dev["transfers"]["to_host"] >= 1 and dev["transfers"]["to_device_per_copy_to_host"] == 4
    stats = report["device_frame"]["scan_statistics"]["roof"]
    cpu = stats["cpu"]
    assert cpu["points_per_scan"] > 10_000 and cpu["second_return_share"] > 0
    diff = stats["difference"]
    assert abs(diff["points_per_scan"]) <= 0.005 * cpu["points_per_scan"]
    assert abs(diff["second_return_share"]) <= 0.002 and abs(diff["rain_share"]) <= 0.002
    assert abs(diff["median_range_m"]) <= 0.01 and abs(diff["median_intensity"]) <= 1.0
