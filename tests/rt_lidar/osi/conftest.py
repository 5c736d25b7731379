"""Shared runs of the OSI tests: one in-process demo with both OSI sinks, one FMU build (module scope:
each costs a second or two)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

_NO_OSI = "ASAM OSI's Python bindings (osi-python, the osi extra) are not installed"


@pytest.fixture(scope="session")
def osi_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``rt-lidar demo --in-process`` of one VLP-16 scan (two sim frames) with both OSI trace sinks."""
    pytest.importorskip("osi3", reason=_NO_OSI)
    from rt_lidar.cli.main import main

    out = tmp_path_factory.mktemp("osi_demo") / "demo"
    rc = main(
        [
            "demo", "--in-process", "--preset", "VLP-16", "--frames", "1", "--quiet", "--out", str(out),
            "--sink", f"osi-sensorview:{out}/sensorview.osi",
            "--sink", f"osi-sensordata:{out}/sensordata.osi",
        ]
    )  # fmt: skip
    assert rc == 0
    assert json.loads((out / "summary.json").read_text())["frames"] == 1
    return out


@pytest.fixture(scope="session")
def vlp16_fmu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``rt-lidar osi fmu --preset VLP-16``."""
    pytest.importorskip("osi3", reason=_NO_OSI)
    from rt_lidar.cli.main import main

    path = tmp_path_factory.mktemp("osi_fmu") / "vlp16.fmu"
    assert main(["osi", "fmu", "--preset", "VLP-16", "--out", str(path)]) == 0
    return path
