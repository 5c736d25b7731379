"""Synthetic dataset generation: sweep files, runs, the SemanticKITTI writer and reader, and the Ray
driver (``rt-lidar generate``).

``generate`` imports Ray only when called, so reading and writing datasets needs no Ray.
"""

from rt_lidar.dataset.errors import DatasetError, SweepError
from rt_lidar.dataset.generate import GenerateSummary, RunFailure, generate
from rt_lidar.dataset.labels import DEFAULT_RULES, SEMANTIC_KITTI_CLASSES, LabelRule
from rt_lidar.dataset.reader import KittiFrame, list_sequences, read_calib, read_sequence
from rt_lidar.dataset.runs import RunSpec, expand_runs
from rt_lidar.dataset.sweep_spec import SweepSpec, load_sweep, parse_sweep
from rt_lidar.dataset.writer import RunResult, sequence_state, write_run

__all__ = [
    "DEFAULT_RULES",
    "SEMANTIC_KITTI_CLASSES",
    "DatasetError",
    "GenerateSummary",
    "KittiFrame",
    "LabelRule",
    "RunFailure",
    "RunResult",
    "RunSpec",
    "SweepError",
    "SweepSpec",
    "expand_runs",
    "generate",
    "list_sequences",
    "load_sweep",
    "parse_sweep",
    "read_calib",
    "read_sequence",
    "sequence_state",
    "write_run",
]
