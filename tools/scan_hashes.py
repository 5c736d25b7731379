"""sha256 of the scan files of every preset's demo, in-process and bridged: record before a refactor,
compare after (the scans must stay byte-identical).

    python tools/scan_hashes.py record before.json     # ~30 s on two cores
    python tools/scan_hashes.py compare before.json    # exit 1 and the runs that differ

Each run is ``rt-lidar demo`` with 2-3 frames: every preset in-process; VLP-16, HDL-64E and OS1-64
bridged; rain + dual returns bridged; a wet road in-process and bridged; sub-rays + sun + echo pulse
width bridged and in-process (with fog). Only the scans' PCD and KITTI files are hashed (their JSON
records name the temporary folder).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
import tempfile
import warnings
from pathlib import Path

from rt_lidar.cli.main import main as rt_lidar
from rt_lidar.sensor.presets import list_presets

BRIDGED = ("VLP-16", "HDL-64E", "OS1-64")
_SUB_SUN = ["--preset", "VLP-16", "--frames", "3", "--sub-rays", "4", "--sun-lux", "50000", "--epw"]
SCENARIOS = {
    "bridged-rain-dual": ["--preset", "VLP-16", "--frames", "3", "--rain", "20", "--return-mode", "dual"],
    "bridged-sub-sun": _SUB_SUN,
    "inproc-sub-sun": [*_SUB_SUN, "--in-process", "--fog", "200"],
    "inproc-wet-road": ["--preset", "HDL-64E", "--frames", "2", "--in-process", "--road-wetness", "0.8"],
    "bridged-wet-road": ["--preset", "VLP-16", "--frames", "2", "--road-wetness", "0.8", "--rain", "10"],
}


def runs() -> dict[str, list[str]]:
    """Every run: name -> ``rt-lidar demo`` options."""
    out = {f"inproc-{p}": ["--preset", p, "--frames", "2", "--in-process"] for p in list_presets()}
    out.update({f"bridged-{p}": ["--preset", p, "--frames", "2"] for p in BRIDGED})
    out.update(SCENARIOS)
    return out


def hashes(only: list[str]) -> dict[str, dict[str, str]]:
    """``run -> {scans/NAME: sha256[:16]}`` of the runs whose name contains one of ``only`` (all: [])."""
    out: dict[str, dict[str, str]] = {}
    for name, args in runs().items():
        if only and not any(o in name for o in only):
            continue
        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with contextlib.redirect_stdout(io.StringIO()):
                if rt_lidar(["demo", "--quiet", "--out", d, *args]) != 0:
                    raise SystemExit(f"{name}: rt-lidar demo failed")
            scans = sorted(p for p in (Path(d) / "scans").iterdir() if p.suffix in (".pcd", ".bin"))
            out[name] = {f"scans/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in scans}
        print(name, len(out[name]), "files", file=sys.stderr, flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["record", "compare"])
    parser.add_argument("file", help="the recorded hashes (JSON)")
    parser.add_argument("--only", nargs="*", default=[], help="runs whose name contains one of these")
    args = parser.parse_args()
    got = hashes(args.only)
    if args.mode == "record":
        Path(args.file).write_text(json.dumps(got, indent=1, sort_keys=True))
        return 0
    want = json.loads(Path(args.file).read_text())
    differ = [k for k in got if want.get(k) != got[k]]
    files = sum(len(v) for v in got.values())
    print(f"{'DIFFERENT: ' + ', '.join(differ) if differ else 'EQUAL'} ({len(got)} runs, {files} files)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
