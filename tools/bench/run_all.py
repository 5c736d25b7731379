"""Run every benchmark of tools/bench/ and write one JSON file each under --out.

Run: .venv/bin/python tools/bench/run_all.py --out docs/bench [--only a.py,b.py] [--skip c.py]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# script -> extra arguments; each writes its JSON to OUT/<name>.json
BENCHES: dict[str, list[str]] = {
    "bench_pipeline.py": [],
    "bench_raycast.py": [],
    "bench_casters.py": [],  # embreex, Embree packets, Open3D, Mitsuba and World.cast side by side
    "bench_bridge.py": [],
    "bench_weather.py": [],
    "bench_udp.py": ["--seconds", "60"],
    "bench_viewer.py": [],
    "bench_rinet.py": [],
    "bench_waveform.py": [],
    "bench_generate.py": [],
    "bench_shm_transfer.py": [],
    "bench_controller_cost.py": [],
    "profile_bridged_frame.py": [],
    "profile_inprocess_frame.py": [],
    "bench_decode.py": [],
    "bench_page_cache.py": [],  # scans written with the page cache let go of behind them and without
    "bench_beam_full.py": [],  # --beam full against --sub-rays 7 / 19 and one ray, whole demos
}
OUT_FLAG = {"bench_udp.py": "--json"}
# second runs of a script with other arguments, under their own JSON name (run after the script's own)
VARIANTS: dict[str, list[tuple[str, list[str]]]] = {
    "bench_controller_cost.py": [("controller_cost_shm", ["--transport", "shm"])],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/bench"))
    parser.add_argument("--only", default="", help="comma-separated scripts to run (default: all)")
    parser.add_argument("--skip", default="", help="comma-separated scripts not to run")
    args = parser.parse_args(argv)
    only = {n for n in args.only.split(",") if n}
    skip = {n for n in args.skip.split(",") if n}
    unknown = (only | skip) - set(BENCHES)
    if unknown:
        parser.error(f"unknown benchmark(s) {sorted(unknown)}; known: {', '.join(BENCHES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name, extra in BENCHES.items():
        if (only and name not in only) or name in skip:
            continue
        script = HERE / name
        if not script.exists():
            continue
        runs = [(script.stem.removeprefix("bench_"), extra), *VARIANTS.get(name, [])]
        for stem, arguments in runs:
            out = args.out / f"{stem}.json"
            print(f"== {name} {' '.join(arguments)} -> {out}", flush=True)
            command = [sys.executable, str(script), OUT_FLAG.get(name, "--out"), str(out), *arguments]
            failed += subprocess.call(command) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
