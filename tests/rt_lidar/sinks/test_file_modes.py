"""Files a run writes honour the umask (0644 under 022, 0600 under 077), as files ``open`` makes do:
scans written through the atomic writer, ``range_image.png``, the config and summary JSON. And
``range_image.png`` says what it shows: a legend with the field, its unit and a colour bar."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rt_lidar.sinks.atomic import atomic_write
from rt_lidar.sinks.range_image import colormap

REPO = Path(__file__).resolve().parents[3]


DEMO = ["demo", "--in-process", "--preset", "VLP-16"]


def modes(folder: Path) -> dict[str, int]:
    return {
        str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_write_gives_the_mode_open_gives(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        with atomic_write(tmp_path / "a.bin") as fh:
            fh.write(b"x" * 100)
        (tmp_path / "plain.bin").write_bytes(b"y")
    finally:
        os.umask(old)
    assert modes(tmp_path) == {"a.bin": mode, "plain.bin": mode}
    assert (tmp_path / "a.bin").read_bytes() == b"x" * 100


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_a_run_writes_every_file_with_the_umask_mode(tmp_path: Path, umask: int, mode: int) -> None:
    args = ["demo", "--in-process", "--preset", "VLP-16", "--frames", "2", "--quiet", "--out", "run"]
    args += ["--sink", "pcd:run/pcd", "--sink", "las:run/las", "--sink", "velodyne-pcap:run/v.pcap"]
    subprocess.run(
        [sys.executable, "-m", "rt_lidar.cli.main", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=lambda: os.umask(umask),  # the child's umask only
        check=True,
        capture_output=True,
        timeout=180,
    )
    found = modes(tmp_path / "run")
    for name in ("scans/000000.pcd", "scans/000001.bin", "range_image.png", "config.json", "summary.json"):
        assert name in found, sorted(found)
    assert {name: m for name, m in found.items() if m != mode} == {}
    assert not [p for p in (tmp_path / "run").rglob("*.part")]  # no temporary file left


def test_range_image_png_names_its_field_and_carries_a_colour_bar(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "rt_lidar.cli.main", *DEMO, "--frames", "1", "--quiet", "--out", "run"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
        capture_output=True,
        timeout=180,
    )
    png = Image.open(tmp_path / "run" / "range_image.png")
    assert png.text["field"] == "intensity" and float(png.text["vmax"]) == 255.0
    rgb = np.asarray(png.convert("RGB"))
    scan_rows = 16 * (256 // 16)  # VLP-16: 16 rings, each row repeated to 256 px
    legend = rgb[scan_rows:]
    assert legend.shape[0] > 20  # a strip under the scan
    # the colour bar: a row of the legend that runs through the colour map from its start to its end
    ramp = colormap(np.linspace(0.0, 1.0, 256))
    bar_rows = [
        r for r in legend if (np.abs(r[:, None, :].astype(int) - ramp[None]).sum(-1).min(1) < 8).mean() > 0.9
    ]
    assert bar_rows, "no colour bar under the scan"
    row = bar_rows[0].astype(int)
    assert (np.abs(row - ramp[0]).sum(-1) < 8).any() and (np.abs(row - ramp[-1]).sum(-1) < 8).any()
    # text: light pixels on the dark legend that are not part of the bar
    assert (legend.min(-1) > 200).sum() > 200
