"""Whole demos give the same scan bytes with the compiled twins (``_fused``, ``_source_steps``,
``_cast_steps``) and with the NumPy code alone (``RT_LIDAR_NO_TWINS=1`` in every process of the run, the
bridged demo's server included)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rt_lidar.physics import fused
from rt_lidar.pipeline import source_steps
from rt_lidar.unreal_bridge.world import world as world_module

needs_built = pytest.mark.skipif(
    fused._c is None or source_steps._c is None or world_module._steps is None,
    reason="the compiled twins were not built (the NumPy code is all there is)",
)


def _scan_hashes(out: Path, args: list[str], numpy_only: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RT_LIDAR_NO_TWINS", None)
    if numpy_only:
        env["RT_LIDAR_NO_TWINS"] = "1"
    cmd = [sys.executable, "-m", "rt_lidar.cli.main", "demo", *args, "--out", str(out), "--quiet"]
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=300)
    files = sorted((out / "scans").glob("*"))
    assert any(f.suffix == ".pcd" for f in files) and any(f.suffix == ".bin" for f in files)
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.suffix in (".pcd", ".bin")}


@needs_built
@pytest.mark.parametrize(
    "args",
    [
        ["--preset", "HDL-64E", "--frames", "2", "--in-process"],
        ["--preset", "VLP-16", "--frames", "2", "--rain", "20"],
    ],
    ids=["hdl64-in-process", "vlp16-bridged-rain"],
)
def test_the_scans_do_not_depend_on_the_compiled_twins(tmp_path: Path, args: list[str]) -> None:
    compiled = _scan_hashes(tmp_path / "compiled", args, numpy_only=False)
    numpy_only = _scan_hashes(tmp_path / "numpy", args, numpy_only=True)
    assert compiled == numpy_only


@needs_built
def test_the_switch_really_leaves_the_numpy_code() -> None:
    probe = (
        "from rt_lidar.physics import fused; from rt_lidar.pipeline import source_steps; "
        "from rt_lidar.unreal_bridge.world import world; "
        "print(fused.available(), source_steps.available(), world._steps is not None)"
    )
    for value, want in ((None, "True True True"), ("1", "False False False")):
        env = {k: v for k, v in os.environ.items() if k != "RT_LIDAR_NO_TWINS"}
        if value is not None:
            env["RT_LIDAR_NO_TWINS"] = value
        got = subprocess.run(
            [sys.executable, "-c", probe], env=env, check=True, capture_output=True, text=True
        )
        assert got.stdout.strip() == want
