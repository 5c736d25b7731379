"""tools/bench/glass_census.py counts, on a street frame, the glass ghosts' mirror rays and the rays
behind panes, which of them change a pulse's returns, and times each group of casts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "bench" / "glass_census.py"


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(TOOL.parents[2])}
    return subprocess.run(
        [sys.executable, str(TOOL), *argv], capture_output=True, text=True, env=env, timeout=600
    )


def test_the_census_of_a_vls128_frame_adds_up(tmp_path: Path) -> None:
    out = tmp_path / "census.json"
    done = _run("--rows", "vls128_dual_single_ray", "--frames", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(out.read_text())["rows"]
    c = row["counts_per_frame"]
    assert c["control: pulses changed by running again"] == 0  # the same hits and stream: the same returns
    # one ray a pulse: every ray whose first surface is glass casts one mirror ray
    assert c["mirror rays"] == c["rays meeting glass first"] > 0
    assert 0 < c["mirror rays whose pulse changed"] <= c["mirror rays meeting a surface"] <= c["mirror rays"]
    assert c["pulses changed by their ghost"] == c["mirror rays whose pulse changed"]
    assert 0 < c["pulses changed by their behind-glass echo"] <= c["of those: a surface behind"]
    assert 0 <= c["mirror rays: bound below the threshold"] <= c["mirror rays"]
    groups = row["mirror_rays_by_group_per_frame"]
    for prefix in ("pane of ", "cos [", "pane range ["):
        parts = [g for name, g in groups.items() if name.startswith(prefix)]
        assert sum(g["cast"] for g in parts) == c["mirror rays"]
        assert sum(g["pulse changed"] for g in parts) == c["mirror rays whose pulse changed"]
    casts = row["casts_per_frame"]
    assert casts["mirror rays of the panes"]["rays"] == c["mirror rays"]
    assert all(v["thread_cpu_ms"] > 0 for v in casts.values())
    assert casts["first surfaces"]["rays"] > casts["behind glass"]["rays"] >= c["rays meeting glass first"]


def test_an_unknown_row_is_refused() -> None:
    done = _run("--rows", "nope")
    assert done.returncode == 2 and "unknown row 'nope'" in done.stderr and "Traceback" not in done.stderr


def test_a_bundles_rays_and_its_detections_name_the_same_pulse() -> None:
    import importlib.util
    from types import SimpleNamespace

    import numpy as np

    spec = importlib.util.spec_from_file_location("glass_census", TOOL)
    assert spec is not None and spec.loader is not None
    census = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(census)
    firings = SimpleNamespace(t_ns=np.array([1000, 1000, 2000]), ring=np.array([3, 4, 3], np.uint16))
    hits = SimpleNamespace(subrays=13, firings=firings)
    rays = np.array([0, 12, 13, 27, 38])  # sub-rays of pulses 0, 0, 1, 2, 2
    by_ray = census._pulse_keys(hits, rays)
    by_pulse = census._pulse_keys(hits, np.array([0, 1, 2]), of_rays=False)
    assert by_ray.tolist() == by_pulse[[0, 0, 1, 2, 2]].tolist()
    assert len(set(by_pulse.tolist())) == 3  # the same time, another laser: another pulse
