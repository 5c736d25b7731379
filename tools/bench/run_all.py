"""Run every benchmark of tools/bench/ and write one JSON file each under --out.

Run: .venv/bin/python tools/bench/run_all.py --out docs/bench
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = ["bench_pipeline.py", "bench_raycast.py", "bench_bridge.py"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/bench"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in BENCHES:
        script = HERE / name
        if not script.exists():
            continue
        out = args.out / (script.stem.removeprefix("bench_") + ".json")
        print(f"== {name} -> {out}", flush=True)
        rc = subprocess.call([sys.executable, str(script), "--out", str(out)])
        failed += rc != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
