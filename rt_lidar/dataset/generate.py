"""The Ray driver: one Ray task per run, resumable, the same bytes on one worker or many.

``generate(sweep, out)`` expands the sweep (:mod:`rt_lidar.dataset.runs`), skips the runs whose sequence
is already complete, deletes the temporary folders of unfinished ones and hands every other run to
Ray as one task (:func:`rt_lidar.dataset.writer.write_run`), at most ``workers`` at a time. Ray retries
a task whose worker died or that raised (``retries`` times); a run that still fails is reported in the
summary and the others go on. Without ``ray_address`` a local Ray is started with ``num_cpus=workers``
and shut down at the end; with one (``auto`` or ``HOST:PORT``) the tasks go to that cluster, whose nodes
must all see ``out`` (a shared file system) and have rt-lidar installed. An already initialised Ray
(``ray.is_initialized()``) is used as it is and left running.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from rt_lidar.dataset.errors import DatasetError
from rt_lidar.dataset.runs import RunSpec, expand_runs, run_digest
from rt_lidar.dataset.sweep_spec import SweepSpec, load_sweep
from rt_lidar.dataset.writer import RunResult, partial_dirs, sequence_state, write_run
from rt_lidar.errors import ConfigError
from rt_lidar.extras import require
from rt_lidar.sinks.atomic import atomic_write

__all__ = ["GenerateSummary", "RunFailure", "generate", "write_manifest"]

OBJECT_STORE_MB = 200
"""Object store of a local Ray: runs hand back only a small result, the data goes to files."""


@dataclass(frozen=True)
class RunFailure:
    """A run that failed on every attempt, with the last error."""

    run_id: str
    sequence: int
    error: str


@dataclass
class GenerateSummary:
    """Figures of one ``generate`` call."""

    runs: int
    written: int = 0
    skipped: int = 0
    frames: int = 0
    points: int = 0
    wall_s: float = 0.0
    workers: int = 0
    failures: list[RunFailure] = field(default_factory=list)
    results: list[RunResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every run is complete."""
        return not self.failures

    @property
    def frames_per_s(self) -> float:
        """Frames written per wall-clock second."""
        return self.frames / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON-able data (without the per-run results)."""
        d = {k: v for k, v in dataclasses.asdict(self).items() if k != "results"}
        d["frames_per_s"] = round(self.frames_per_s, 3)
        return d


def write_manifest(spec: SweepSpec, runs: list[RunSpec], out: Path) -> None:
    """``sweep.json`` (the resolved sweep) and ``runs.json`` (sequence -> run id, digest) in ``out``."""
    resolved = {k: v for k, v in dataclasses.asdict(spec).items() if k != "source"}
    for sensor in resolved["sensors"]:  # a preset sensor's file stays as it was before rigs
        if not sensor["rig"]:
            del sensor["rig"]
    table = [{"sequence": r.sequence_name, "run_id": r.run_id, "digest": run_digest(r)} for r in runs]
    for name, data in (("sweep.json", resolved), ("runs.json", table)):
        with atomic_write(out / name) as fh:
            fh.write((json.dumps(data, indent=2, sort_keys=True) + "\n").encode())


def _connect(workers: int | None, address: str | None, object_store_mb: int) -> tuple[bool, int]:
    """Start or join Ray; (whether we started it, the number of runs to keep in flight)."""
    ray = require("ray", "the dataset generator", "dataset")

    started = False
    if not ray.is_initialized():
        if address:
            try:
                ray.init(address=address, log_to_driver=False)
            except Exception as exc:  # ConnectionError, ValueError, RuntimeError: all mean "not there"
                raise DatasetError(
                    f"cannot join the Ray cluster at {address!r}: {_error_text(exc)}"
                ) from None
        else:
            ray.init(
                num_cpus=workers or os.cpu_count() or 1,
                include_dashboard=False,
                log_to_driver=False,
                object_store_memory=object_store_mb * 2**20,
            )
        started = True
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return started, max(1, min(workers or cpus, cpus))


def _error_text(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}".strip()


def generate(
    sweep: str | Path | SweepSpec,
    out: str | Path,
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    retries: int = 1,
    progress: bool = True,
    object_store_mb: int = OBJECT_STORE_MB,
) -> GenerateSummary:
    """Generate every run of ``sweep`` under ``out`` (KITTI odometry layout); returns the summary."""
    ray = require("ray", "the dataset generator", "dataset")

    if workers is not None and workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    t0 = time.perf_counter()
    spec = sweep if isinstance(sweep, SweepSpec) else load_sweep(sweep)
    runs = expand_runs(spec)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    states = {r.sequence: sequence_state(r, root) for r in runs}
    foreign = [r for r in runs if states[r.sequence] == "foreign"]
    if foreign:
        names = ", ".join(f"sequences/{r.sequence_name}" for r in foreign[:5])
        raise DatasetError(f"{root}: {names} hold runs of another sweep; use a new --out")
    write_manifest(spec, runs, root)
    todo = [r for r in runs if states[r.sequence] != "complete"]
    for r in todo:  # unfinished attempts of a killed sweep: redo from scratch
        for p in partial_dirs(r, root):
            shutil.rmtree(p, ignore_errors=True)
    summary = GenerateSummary(runs=len(runs), skipped=len(runs) - len(todo))
    if not todo:
        summary.wall_s = time.perf_counter() - t0
        return summary
    started, in_flight = _connect(workers, ray_address, object_store_mb)
    summary.workers = in_flight
    task = ray.remote(num_cpus=1, max_retries=retries, retry_exceptions=True)(write_run)
    pending: dict[Any, RunSpec] = {}
    queue = list(reversed(todo))
    bar = tqdm(total=len(runs), initial=summary.skipped, unit="run", desc="runs", disable=not progress)
    try:
        while queue or pending:
            while queue and len(pending) < in_flight:
                run = queue.pop()
                pending[task.remote(run, str(root.resolve()))] = run
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                run = pending.pop(ref)
                try:
                    result: RunResult = ray.get(ref)
                except Exception as exc:  # any failure of one run is reported, the others go on
                    summary.failures.append(RunFailure(run.run_id, run.sequence, _error_text(exc)))
                else:
                    summary.results.append(result)
                    summary.written += 0 if result.skipped else 1
                    summary.frames += result.frames
                    summary.points += result.points
                bar.update(1)
                bar.set_postfix(failed=len(summary.failures), frames=summary.frames)
    finally:
        bar.close()
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()
    summary.failures.sort(key=lambda f: f.sequence)
    summary.results.sort(key=lambda r: r.sequence)
    summary.wall_s = time.perf_counter() - t0
    return summary
