"""The wheel ships one import name, ``rt_lidar`` (the top-level ``kernels``, ``unreal_bridge`` and
``sensor_presets`` folders inside it, not as generic names of their own), the data and kernels through
the symlinks, the LICENSE, and none of the tools (the fuzz tests' hostile clients)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


_NOT_SOURCE = shutil.ignore_patterns(
    ".git", "build", "*.egg-info", ".venv*", "__pycache__", "out", "*.so", ".*_cache", "*.part"
)


def source_copy(dest: Path) -> Path:
    """The files git knows (tracked, or new and not ignored) copied to ``dest``, symlinks as symlinks:
    a clean tree, as a fresh clone has, without the checkout's build/ or egg-info. Outside a git
    checkout: the tree less what the build and the tests leave (``_NOT_SOURCE``)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        shutil.copytree(REPO, dest, symlinks=True, ignore=_NOT_SOURCE)
        return dest
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        rel = os.fsdecode(raw)
        src, dst = REPO / rel, dest / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the work tree, not yet in the index
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = source_copy(tmp / "src")
    out = tmp / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            ".",
        ],
        cwd=src,
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = out.glob("rt_lidar-*.whl")
    return built


def test_the_wheel_has_one_top_level_name_and_its_dist_info(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    dist_info = {t for t in tops if t.startswith("rt_lidar-") and t.endswith(".dist-info")}
    assert len(dist_info) == 1 and tops == {"rt_lidar", *dist_info}, sorted(tops)
    assert not [n for n in names if Path(n).name == "attacks.py"]
    assert not [n for n in names if n.startswith(("rt_lidar/tests/", "rt_lidar/tools/"))]
    (info,) = dist_info
    assert f"{info}/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata or "License: MIT" in metadata


@pytest.mark.parametrize(
    ("folder", "pattern"),
    [
        ("sensor_presets", "*.toml"),
        ("kernels", "*.py"),
        ("unreal_bridge", "*.py"),
        ("unreal_bridge/world", "*.py"),
    ],
)
def test_the_symlinked_folders_are_in_the_wheel_under_rt_lidar(
    wheel: Path, folder: str, pattern: str
) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = sorted(p.name for p in (REPO / folder).glob(pattern))
    assert expected, f"{folder}/{pattern} matched nothing in the repository"
    missing = [n for n in expected if f"rt_lidar/{folder}/{n}" not in names]
    assert missing == []


def test_the_unpacked_wheel_imports_from_itself(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "import rt_lidar, rt_lidar.kernels, rt_lidar.sensor_presets, rt_lidar.unreal_bridge.world;"
        "from rt_lidar.sensor.presets import load_preset;"
        "print(rt_lidar.__file__); print(rt_lidar.kernels.__file__); print(load_preset('VLP-16').name)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    init, kernels_init, preset = run.stdout.split()
    assert Path(init).is_relative_to(site) and Path(kernels_init).is_relative_to(site)
    assert preset == "VLP-16"
