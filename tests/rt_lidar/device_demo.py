"""``rt-lidar demo --in-process --device cuda-source-on-cpu`` run as a user runs it, for the device tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def device_demo_summary(tmp_path: Path, *args: str) -> dict[str, Any]:
    """The ``device`` record of summary.json of a 2-scan VLP-16 demo on the device frame's CPU twin with
    ``args`` added; fails the test if the demo fails or warns (a warning: some physics left the device)."""
    out = tmp_path / "o"
    cmd = [
        sys.executable,
        "-m",
        "rt_lidar.cli.main",
        "demo",
        "--in-process",
        "--device",
        "cuda-source-on-cpu",
    ]
    cmd += ["--preset", "VLP-16", *args, "--frames", "2", "--quiet", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    device: dict[str, Any] = json.loads((out / "summary.json").read_text())["device"]
    return device
