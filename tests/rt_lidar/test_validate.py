"""``rt-lidar validate``: the report's format, metric names and the published trends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rt_lidar.cli.validate import add_validate_parser
from rt_lidar.errors import ConfigError
from rt_lidar.validation.report import run_validation, trend_checks


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("validate")
    return out, run_validation(out)


def test_report_files_and_metric_names(report: tuple[Path, dict]) -> None:
    out, rep = report
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk == json.loads(json.dumps(rep))
    assert (out / "report.md").read_text().startswith("# rt-lidar validation report")
    for name in ("rain_max_range", "rain_range_bands", "rain_threshold_sweep", "fog_max_range"):
        assert (out / f"{name}.png").stat().st_size > 10_000
    assert rep["rain_max_range"]["rates_mm_h"] == [0, 5, 10, 25, 50]
    assert len(rep["rain_max_range"]["max_range_m"]) == 5
    for m in ("points_near", "points_mid", "points_far", "false_points"):
        assert len(rep["rain_range_bands"][m]) == 5
    assert {"thresholds", "false_positives", "false_negatives"} <= set(rep["rain_threshold_sweep"])
    assert rep["fog_max_range"]["visibility_m"] == [200, 100, 50, 30]


def test_published_trends_hold(report: tuple[Path, dict]) -> None:
    failed = [(n, d) for n, checks in trend_checks(report[1]).items() for d, ok in checks if not ok]
    assert not failed


def test_only_and_unknown(tmp_path: Path) -> None:
    rep = run_validation(tmp_path, ["fog_max_range"])
    assert list(rep) == ["fog_max_range"]
    with pytest.raises(ConfigError, match="unknown experiment"):
        run_validation(tmp_path, ["nope"])
    import argparse

    p = argparse.ArgumentParser()
    add_validate_parser(p.add_subparsers())
    args = p.parse_args(["validate", "--out", str(tmp_path), "--only", "rain_max_range"])
    assert args.only == ["rain_max_range"] and args.func(args) == 0


def test_the_clis_experiment_names_are_the_experiments_and_its_parser_stays_light() -> None:
    """``validate --only`` offers exactly the experiments there are, and building the CLI's parser
    (every command's start, the server's too) does not import the experiments or matplotlib."""
    import subprocess
    import sys

    from rt_lidar.cli.validate import EXPERIMENT_NAMES
    from rt_lidar.validation.experiments import EXPERIMENTS

    assert tuple(EXPERIMENTS) == EXPERIMENT_NAMES
    probe = (
        "import sys, rt_lidar.cli.main as m; m.build_parser(); "
        "print(sorted(k for k in sys.modules if k.startswith(('matplotlib', 'rt_lidar.validation'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
