"""A recording with a corrupt scan file: the viewer names the file, skips it and plays on; a
``--screenshot`` run ends as soon as the recording does, with one error line (exit 2), instead of
waiting out ``--timeout`` and exiting 1 without a word."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.points import POINT_DTYPE
from rt_lidar.sinks.pcd import write_pcd
from rt_lidar.viewer.help_text import bad_frame_lines
from rt_lidar.viewer.sources import RecordingSource

REPO = Path(__file__).resolve().parents[3]


def recording(folder: Path, scans: int = 4, corrupt: tuple[int, ...] = (1,)) -> Path:
    """``scans`` PCD files of a ring of points; those in ``corrupt`` cut short after their header."""
    folder.mkdir()
    for i in range(scans):
        pts = np.zeros(500, POINT_DTYPE)
        angle = np.linspace(0, 2 * np.pi, pts.size, endpoint=False)
        pts["x"], pts["y"], pts["z"] = 10 * np.cos(angle), 10 * np.sin(angle), i * 0.1
        pts["intensity"] = 40.0
        path = write_pcd(folder / f"{i:06d}.pcd", pts)
        if i in corrupt:
            data = path.read_bytes()
            path.write_bytes(data[: data.index(b"DATA binary\n") + 20])
    return folder


def test_recording_source_names_the_unreadable_file_and_plays_on(tmp_path: Path) -> None:
    now = [0.0]
    source = RecordingSource(recording(tmp_path / "rec"), rate_hz=10.0, clock=lambda: now[0])
    shown = []
    with pytest.warns(UserWarning, match=r"rec/000001\.pcd: field 'POINTS'") as caught:
        for step in range(8):
            now[0] = step * 0.1
            frames = source.poll()
            if "scan" in frames:
                shown.append(frames["scan"].header["seq"])
    assert shown == [0, 2, 3]
    assert len(caught) == 1  # said once, not at every pass over the scan
    assert source.bad_frames == 1 and source.ended
    assert "000001.pcd" in bad_frame_lines(source)[0] and "1 unreadable scan(s)" in bad_frame_lines(source)[0]


@pytest.mark.skipif(
    shutil.which("Xvfb") is None and not os.environ.get("DISPLAY"), reason="needs an X server"
)
def test_screenshot_of_a_recording_with_a_corrupt_scan_ends_with_one_error_line(tmp_path: Path) -> None:
    # the last scan: playback always comes to it (one in between may be passed over to keep to the clock)
    rec = recording(tmp_path / "rec", scans=3, corrupt=(2,))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = ["view", str(rec), "--screenshot", "shot.png", "--frames", "3", "--timeout", "60", "--rate", "20"]
    t0 = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "rt_lidar.cli.main", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - t0
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    errors = [ln for ln in lines if ": error: " in ln]
    assert len(errors) == 1 and errors[0] == lines[-1], run.stderr
    assert errors[0].startswith("rt-lidar view: error: 1 of the recording's scans are unreadable")
    assert "000002.pcd" in errors[0] and re.search(r"after [12] of --frames 3 scans", errors[0])
    assert (tmp_path / "shot.png").stat().st_size > 0
    assert took < 45, f"waited {took:.0f} s: the run should end with the recording, not at --timeout"
