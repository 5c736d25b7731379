"""What writing scans costs the machine, with the page cache let go of behind the writer and without.

    .venv/bin/python tools/bench/bench_page_cache.py --out docs/bench/page_cache.json \
        [--files 60] [--mb 6.6] [--rounds 2] [--no-drain]

Each run is a fresh process that writes ``--files`` files of ``--mb`` MB through ``atomic_write`` (a
HDL-64E scan's PCD + KITTI pair is 6.6 MB, a VLS-128's 12.5 MB), 30 ms apart as a sink at ~30 scans
a second, and waits for its drop-behind thread to settle: ``drop`` as rt-lidar runs (the default),
``keep`` with ``RT_LIDAR_KEEP_PAGE_CACHE=1``. The runs alternate. Figures per file: the writer
process's CPU and the whole VM's busy CPU time (``/proc/stat``, so the kernel's write-back and its
interrupts count too).

A fresh page-cache page costs far more than one used before on a VM whose memory its host backs
lazily (the host's first touch), and which pages the kernel hands out depends on what was freed
before. So before each run this process first takes (and holds) anonymous memory until it gets pages
that were never touched (``--no-drain``: not), so that neither mode runs on pages the other freed:
the case of a fresh CI machine. It holds at most ``--drain-cap-gb``.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

_WRITER = r"""
import os, sys, time
import numpy as np
from rt_lidar.sinks.atomic import atomic_write
from rt_lidar.sinks.drop_behind import drop_behind
folder, files, nbytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
def vm_busy():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
b0, c0 = vm_busy(), time.process_time()
for i in range(files):
    with atomic_write(f"{folder}/{i:06d}.bin") as fh:
        fh.write(data.data)
    time.sleep(0.03)
drop_behind.settle(30.0)
print(vm_busy() - b0, time.process_time() - c0, drop_behind.active, drop_behind.dropped)
"""

_FRESH_US_PER_PAGE = 6.0
"""A page whose first touch costs more than this is taken as never touched before (reused pages cost
~2.5 us here, first touches ~7.5 us)."""


class Drain:
    """Anonymous memory taken and held until the pages that come are ones never touched."""

    def __init__(self, cap_bytes: int) -> None:
        self.cap_bytes = cap_bytes
        self.held: list[mmap.mmap] = []

    @property
    def held_bytes(self) -> int:
        return sum(len(m) for m in self.held)

    def run(self, chunk: int = 64 << 20) -> None:
        while self.held_bytes + chunk <= self.cap_bytes:
            m = mmap.mmap(-1, chunk, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            pages = np.frombuffer(m, np.uint8)
            t = time.perf_counter()
            pages[:: mmap.PAGESIZE] = 1
            self.held.append(m)
            if (time.perf_counter() - t) / (chunk // mmap.PAGESIZE) * 1e6 > _FRESH_US_PER_PAGE:
                return


def one_run(mode: str, folder: Path, files: int, nbytes: int) -> dict[str, Any]:
    """One writer process in ``mode`` (``drop`` / ``keep``): its figures per file."""
    env = dict(os.environ)
    env.pop("RT_LIDAR_KEEP_PAGE_CACHE", None)
    if mode == "keep":
        env["RT_LIDAR_KEEP_PAGE_CACHE"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", _WRITER, str(folder), str(files), str(nbytes)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    vm_s, proc_s, active, dropped = float(out[0]), float(out[1]), out[2] == "True", int(out[3])
    return {
        "mode": mode,
        "active": active,
        "dropped_files": dropped,
        "vm_busy_ms_per_file": 1e3 * vm_s / files,
        "writer_cpu_ms_per_file": 1e3 * proc_s / files,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=60)
    ap.add_argument("--mb", type=float, default=6.6, help="MB a file")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-drain", action="store_true", help="do not take the touched free pages first")
    ap.add_argument("--drain-cap-gb", type=float, default=6.0)
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a folder under out/)")
    ap.add_argument("--out", type=Path, default=Path("docs/bench/page_cache.json"))
    args = ap.parse_args()
    if args.files < 1 or args.rounds < 1 or args.mb <= 0:
        ap.error("--files and --rounds must be at least 1, --mb above 0")
    base = args.dir or Path("out")
    base.mkdir(parents=True, exist_ok=True)
    drain = Drain(int(args.drain_cap_gb * (1 << 30)))
    runs = []
    with tempfile.TemporaryDirectory(dir=base, prefix="bench_page_cache.") as tmp:
        for r in range(args.rounds):
            for mode in ("drop", "keep"):
                if not args.no_drain:
                    drain.run()
                folder = Path(tmp) / f"{mode}{r}"
                folder.mkdir()
                runs.append(one_run(mode, folder, args.files, int(args.mb * 1e6)))
                print(json.dumps(runs[-1]))
    med = {
        mode: {
            k: statistics.median(x[k] for x in runs if x["mode"] == mode)
            for k in ("vm_busy_ms_per_file", "writer_cpu_ms_per_file")
        }
        for mode in ("drop", "keep")
    }
    result = {
        "bench": "page_cache",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "files": args.files,
        "mb_per_file": args.mb,
        "drained": not args.no_drain,
        "drain_held_gb": drain.held_bytes / (1 << 30),
        "runs": runs,
        "median": med,
        "keep_over_drop": {  # None where the drop runs' figure rounds to 0 (/proc/stat counts 10 ms ticks)
            k: med["keep"][k] / med["drop"][k] if med["drop"][k] > 0 else None
            for k in ("vm_busy_ms_per_file", "writer_cpu_ms_per_file")
        },
        "cpus": os.cpu_count(),
    }
    write_json(args.out, result)
    print(json.dumps({"median": med, "keep_over_drop": result["keep_over_drop"]}, indent=2))


if __name__ == "__main__":
    main()
