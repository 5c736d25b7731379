"""The Ray driver on a local 2-CPU Ray: the small sweep, 1 vs 2 workers, a killed worker, failures, CLI.

Every test but the CLI one shares one Ray started by the module fixture (``generate`` uses a Ray that
is already up); the CLI test starts and stops its own. No Ray process may outlive the module.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from dataset_support import SMALL_SWEEP, tiny_sweep_dict, tree_digest

from rt_lidar.cli.generate import add_generate_parser
from rt_lidar.dataset import (
    DatasetError,
    GenerateSummary,
    expand_runs,
    generate,
    load_sweep,
    parse_sweep,
    read_sequence,
    write_run,
)
from rt_lidar.dataset.labels import split_labels
from rt_lidar.dataset.writer import PARTIAL

ray = pytest.importorskip("ray")

RAY_NAMES = ("raylet", "gcs_server", "default_worker.py", "ray::", "dashboard", "log_monitor.py")


def _ray_pids() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if any(n in cmd for n in RAY_NAMES):
            pids.add(int(entry.name))
    return pids


def _assert_no_new_ray(before: set[int]) -> None:
    deadline = time.monotonic() + 20
    while (left := _ray_pids() - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"stray Ray processes: {sorted(left)}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The small sweep written in this process, without Ray: what every Ray run must equal."""
    out = tmp_path_factory.mktemp("reference")
    for run in expand_runs(load_sweep(SMALL_SWEEP)):
        write_run(run, out)
    return tree_digest(out / "sequences")


def test_cli_starts_and_stops_a_local_ray(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _ray_pids()
    parser = argparse.ArgumentParser()
    add_generate_parser(parser.add_subparsers())
    sweep = tmp_path / "one.toml"
    sweep.write_text(
        SMALL_SWEEP.read_text()
        .replace("seeds = [1, 2]", "seeds = [1]")
        .replace("rain_mm_h = [0.0, 20.0]", "rain_mm_h = [0.0]")
    )
    args = parser.parse_args(
        ["generate", str(sweep), "--out", str(tmp_path / "ds"), "--workers", "1", "--quiet"]
    )
    assert args.func(args) == 0
    assert '"written": 1' in capsys.readouterr().out
    assert not ray.is_initialized()
    _assert_no_new_ray(before)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A 2-CPU local Ray for the module, shut down at the end, leaving no process behind."""
    before = _ray_pids()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=200 * 2**20)
    yield
    ray.shutdown()
    _assert_no_new_ray(before)


def test_small_sweep_on_two_workers(tmp_path: Path, local_ray: None, reference: dict[str, str]) -> None:
    s = generate(SMALL_SWEEP, tmp_path, workers=2, progress=False)
    assert s.ok and s.runs == 4 and s.written == 4 and s.frames == 12 and s.workers == 2
    assert s.points == sum(len(f.points) for seq in range(4) for f in read_sequence(tmp_path, seq))
    assert len({r.worker_pid for r in s.results}) == 2  # both workers took part
    assert tree_digest(tmp_path / "sequences") == reference
    for name in ("sweep.json", "runs.json"):
        assert (tmp_path / name).is_file()
    labels = next(read_sequence(tmp_path, 1)).labels
    assert labels is not None
    semantic, _ = split_labels(labels)
    assert np.count_nonzero(semantic == 1) > 0  # rain clutter is labelled outlier
    again = generate(SMALL_SWEEP, tmp_path, workers=2, progress=False)
    assert again.ok and again.skipped == 4 and again.written == 0


def test_one_worker_gives_the_same_bytes(tmp_path: Path, local_ray: None, reference: dict[str, str]) -> None:
    s = generate(SMALL_SWEEP, tmp_path, workers=1, progress=False)
    assert s.ok and s.workers == 1
    # one run at a time (the module's Ray has two worker processes: either may take each run)
    spans = sorted((r.started_s, r.started_s + r.wall_s) for r in s.results)
    assert len(spans) == 4 and all(b[0] >= a[1] - 1e-3 for a, b in itertools.pairwise(spans))
    assert tree_digest(tmp_path / "sequences") == reference


def test_killed_worker_then_rerun_gives_the_same_bytes(
    tmp_path: Path, local_ray: None, reference: dict[str, str]
) -> None:
    box: dict[str, GenerateSummary] = {}
    driver = threading.Thread(
        target=lambda: box.update(s=generate(SMALL_SWEEP, tmp_path, workers=2, retries=0, progress=False))
    )
    driver.start()
    killed = None
    deadline = time.monotonic() + 60
    while killed is None and time.monotonic() < deadline and driver.is_alive():
        for part in (tmp_path / "sequences").glob(f".*{PARTIAL}*"):
            pid = int(part.name.split(PARTIAL)[1].split("-")[0])
            os.kill(pid, signal.SIGKILL)  # the Ray worker process writing this run
            killed = part.name
            break
        time.sleep(0.002)
    driver.join(120)
    assert killed is not None, "no run was caught in flight"
    first = box["s"]
    assert not first.ok and len(first.failures) >= 1
    assert first.written + len(first.failures) == 4
    assert "Worker" in first.failures[0].error or "died" in first.failures[0].error
    assert (tmp_path / "sequences" / killed).exists()  # the killed attempt left its temporary folder

    second = generate(SMALL_SWEEP, tmp_path, workers=2, progress=False)
    assert second.ok and second.written == len(first.failures)
    assert tree_digest(tmp_path / "sequences") == reference  # no temporary folder left either


def test_failing_run_is_retried_then_reported(tmp_path: Path, local_ray: None) -> None:
    mesh = tmp_path / "broken.ply"
    mesh.write_text("ply\nthis is not a mesh\n")
    d = tiny_sweep_dict()
    d["weather"] = {"rain_mm_h": [0.0]}
    d["scenes"].append({"name": "broken", "kind": "mesh", "path": str(mesh)})
    s = generate(parse_sweep(d, "mixed.toml"), tmp_path / "ds", workers=2, retries=1, progress=False)
    assert (
        s.runs == 2 and s.written == 1 and [f.run_id for f in s.failures] == ["broken_scene_vlp-16_clear_s3"]
    )
    assert "SceneError" in s.failures[0].error and "broken.ply" in s.failures[0].error
    assert sorted(p.name for p in (tmp_path / "ds" / "sequences").iterdir()) == ["00"]


def test_an_output_of_another_sweep_is_refused(tmp_path: Path) -> None:
    (run, _) = expand_runs(parse_sweep(tiny_sweep_dict(), "tiny.toml"))
    write_run(run, tmp_path)
    other = parse_sweep(tiny_sweep_dict(seeds=[4]), "other.toml")
    with pytest.raises(DatasetError, match=r"sequences/00 hold runs of another sweep; use a new --out"):
        generate(other, tmp_path, progress=False)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        generate(other, tmp_path, workers=0, progress=False)
    assert sorted(p.name for p in (tmp_path / "sequences").iterdir()) == ["00"]


def test_a_rig_sweep_on_ray_resumes(tmp_path: Path, local_ray: None) -> None:
    """A sweep of a two-VLP-16 rig and a lone VLP-16 on 2 workers: the rig's sequence per sensor, the
    same bytes as without Ray; a rerun after a lost rig sequence writes only that one again."""
    rig = tmp_path / "two.toml"
    rig.write_text(
        '[[sensor]]\nname = "a"\npreset = "VLP-16"\n'
        '[[sensor]]\nname = "b"\npreset = "VLP-16"\nmount = { xyz = [1.5, 0.0, 1.0] }\n'
    )
    d = tiny_sweep_dict()
    d["sensors"] = [{"rig": "two.toml"}, {"preset": "VLP-16"}]
    spec = parse_sweep(d, str(tmp_path / "rigs.toml"), tmp_path)
    s = generate(spec, tmp_path / "ds", workers=2, progress=False)
    assert s.ok and s.runs == 4 and s.written == 4
    ref = tmp_path / "ref"
    for run in expand_runs(spec):
        write_run(run, ref)
    assert tree_digest(tmp_path / "ds" / "sequences") == tree_digest(ref / "sequences")
    assert sorted(p.name for p in (tmp_path / "ds" / "sequences" / "00").iterdir()) == [
        "a",
        "b",
        "config.json",
        "rig.json",
        "run.json",
    ]
    shutil.rmtree(tmp_path / "ds" / "sequences" / "01")  # the rig in the rain, lost
    again = generate(spec, tmp_path / "ds", workers=2, progress=False)
    assert again.ok and again.skipped == 3 and again.written == 1
    assert tree_digest(tmp_path / "ds" / "sequences") == tree_digest(ref / "sequences")
