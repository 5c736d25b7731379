"""What a lent GPU machine has for tools/gpu_check.sh, checked before anything runs: writes preflight.json.

- the Python that runs the check, NumPy, and whether this project's own imports work there (Embree
  through ``embreex``, ``trimesh``, ``re2``: without them the CPU frame, the reference, cannot run);
- whether the compiled twins load (they are built for one Python: a copy of the repository from a
  Python 3.11 machine on a 3.12 one falls back to NumPy, which changes no statistic, only the CPU's speed);
- CuPy: importable, a device seen, a small kernel run (the device frame needs all three), and ``nvcc``;
- where CuPy is missing: whether a package registry answers this machine (``pip download`` of the wheel
  matching the driver's CUDA major version, with a short timeout). If one answers, the wheel is installed
  into ``--site`` (never over the machine's own packages) and used; if none does, it says so in one line
  and names the fix (a wheel in ``.whl/``, docs/gpu.md). ``--offline`` (the dry run) asks no registry.

Prints one line a finding and writes ``OUT/preflight.json``; exits 0 when CuPy works (after an install or
not), 3 when it does not (the check then records the CPU's figures and the error), 1 when this project
cannot be imported at all.

Run: python tools/bench/gpu_preflight.py OUT_DIR [--offline] [--site /tmp/site]
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PROJECT_IMPORTS = ("numpy", "embreex", "trimesh", "re2", "msgpack")
"""What the CPU frame needs beyond the standard library, by name."""
CHECK_MODULES = (
    "rt_lidar.pipeline.builder",
    "rt_lidar.pipeline.device_frame",
    "rt_lidar.physics.device_physics",
    "rt_lidar.rig.loop",
)
"""The modules the check's steps import: the first package each lacks is named too."""
WHEEL_OF = {"re2": "google-re2", "zmq": "pyzmq", "yaml": "pyyaml", "PIL": "pillow"}
"""The wheel (pip's name) of an import name where the two differ."""
TWINS = (
    "rt_lidar.physics._fused",
    "rt_lidar.pipeline._beam_steps",
    "rt_lidar.unreal_bridge.world._cast_steps",
)
REGISTRY_TIMEOUT_S = 25
INSTALL_TIMEOUT_S = 150


def _try(module: str) -> str | None:
    """None when ``module`` imports, else the error in one line."""
    try:
        importlib.import_module(module)
    except Exception as exc:  # ImportError, or a library's own error at import
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def cuda_driver_major() -> int | None:
    """The CUDA version the driver supports (``nvidia-smi``'s header), major part; None without one."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        text = subprocess.run([smi], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"CUDA Version:\s*(\d+)", text)
    return int(m.group(1)) if m else None


def cupy_status() -> dict[str, Any]:
    """CuPy's version, the devices it sees and a small kernel's result, or the error where one fails."""
    got: dict[str, Any] = {}
    try:
        import cupy

        got["version"] = cupy.__version__
        got["devices"] = int(cupy.cuda.runtime.getDeviceCount())
        got["kernel_ok"] = bool(int(cupy.arange(10, dtype=cupy.int64).sum()) == 45)
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        got["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
    except Exception as exc:
        got["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    got["ok"] = "error" not in got and got.get("devices", 0) > 0 and got.get("kernel_ok", False)
    return got


def fetch_cupy(major: int, site: Path) -> tuple[bool, str]:
    """Install ``cupy-cuda{major}x`` from a package registry into ``site``, where one answers: (done,
    one line saying what happened)."""
    wheel = f"cupy-cuda{major}x"
    py = [sys.executable, "-m", "pip"]
    with tempfile.TemporaryDirectory() as tmp:
        probe = [*py, "download", "--no-deps", "--only-binary=:all:", "--timeout", "10", "--retries", "0"]
        try:
            proc = subprocess.run(
                [*probe, "-d", tmp, wheel], capture_output=True, text=True, timeout=REGISTRY_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return False, f"no package registry answered in {REGISTRY_TIMEOUT_S} s"
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
            return False, f"no package registry reachable ({last[:160]})"
        try:
            inst = subprocess.run(
                [*py, "install", "-q", "--no-cache-dir", "--target", str(site), wheel],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return False, f"pip install {wheel} took over {INSTALL_TIMEOUT_S} s"
        if inst.returncode != 0:
            last = (inst.stderr.strip().splitlines() or ["pip failed"])[-1]
            return False, f"pip install {wheel} failed ({last[:160]})"
    return True, f"installed {wheel} from the registry into {site}"


def preflight(out: Path, offline: bool, site: Path) -> tuple[dict[str, Any], int]:
    """The findings (module docstring) and the exit code."""
    got: dict[str, Any] = {
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "nvcc": shutil.which("nvcc"),
        "cuda_driver_major": cuda_driver_major(),
    }
    missing = {m: e for m in PROJECT_IMPORTS if (e := _try(m)) is not None}
    for module in CHECK_MODULES:  # each names the first package it lacks (bring it, run again)
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            name = (exc.name or module).split(".")[0]
            missing.setdefault(name, f"ModuleNotFoundError (needed by {module})")
        except Exception as exc:
            missing.setdefault(module, f"{type(exc).__name__}: {str(exc)[:160]}")
    got["project_imports_missing"] = missing
    twins = {m: _try(m) for m in TWINS}
    got["compiled_twins"] = "loaded" if not any(twins.values()) else "not loaded here: the NumPy backend runs"
    got["cupy"] = cupy_status()
    if not got["cupy"]["ok"] and "version" not in got["cupy"]:  # not installed at all
        major = got["cuda_driver_major"]
        if offline:
            got["cupy_install"] = "not tried (--offline)"
        elif major is None:
            got["cupy_install"] = "not tried: no NVIDIA driver (nvidia-smi) on this machine"
        else:
            done, line = fetch_cupy(major, site)
            got["cupy_install"] = line
            if done:
                sys.path.insert(0, str(site))
                importlib.invalidate_caches()
                got["cupy"] = cupy_status()
    if not got["cupy"]["ok"]:
        got["fix"] = (
            "CuPy does not run here (cupy_install says why none was fetched): bring the wheel "
            "(cupy-cudaNNx for the driver's CUDA major version) in .whl/ and carry it (docs/gpu.md, "
            "'The device check')"
        )
    if missing:
        wheels = ", ".join(sorted(WHEEL_OF.get(m, m) for m in missing))
        got["fix_imports"] = (
            f"bring wheels for {wheels} in .whl/ (docs/performance-notes.md, 'Running the checks'): "
            "the CPU frame cannot run without them"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "preflight.json").write_text(json.dumps(got, indent=2) + "\n")
    rc = 1 if missing else (0 if got["cupy"]["ok"] else 3)
    return got, rc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--offline", action="store_true", help="ask no package registry (the dry run)")
    ap.add_argument("--site", default="/tmp/site", help="where a fetched CuPy is installed")
    args = ap.parse_args(argv)
    got, rc = preflight(Path(args.out), args.offline, Path(args.site))
    cupy = got["cupy"]
    state = (
        f"CuPy {cupy.get('version')} on {cupy.get('gpu')}" if cupy["ok"] else f"no CuPy ({cupy.get('error')})"
    )
    print(f"gpu_preflight: {got['python']}; {state}; compiled twins {got['compiled_twins']}")
    for key in ("cupy_install", "fix", "fix_imports"):
        if key in got:
            print(f"gpu_preflight: {key}: {got[key]}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
