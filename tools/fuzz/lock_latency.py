"""What a full-budget lidar call does to another client: ``getCarState`` latency while it casts.

    .venv/bin/python tools/fuzz/lock_latency.py [--root CHECKOUT] [--repeat 2] [--attack full_budget_calls]

Starts ``rt-lidar serve`` (street, VLP-16, paused) from ``--root`` (default: this checkout; point it
at an exported older commit, ``git archive REV | tar -x -C DIR``, to measure before a change) and runs
the attack ``--repeat`` times, printing its line: the lidar calls' durations and ``getCarState``'s
calls, p50 and max latency meanwhile (``full_budget_calls`` of ``tools/fuzz/attacks.py``). Any attack of
``ATTACKS`` (``tools/fuzz/attacks.py``) runs the same way with ``--attack NAME`` (``young_flood``: the
probes answered while young silent connections fill every slot).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from attacks import ATTACKS, probe  # tools/fuzz/attacks.py, beside this script

ROOT = Path(__file__).resolve().parents[2]


def start(root: Path) -> tuple[subprocess.Popen[str], int]:
    """``rt-lidar serve`` from the checkout ``root`` on a free loopback port."""
    cmd = [
        sys.executable,
        "-m",
        "rt_lidar.cli.main",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--scene",
        "street",
        "--preset",
        "VLP-16",
        "--paused",
        "--exit-with-stdin",
    ]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(
        cmd,
        cwd=root,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        found = re.search(r" on 127\.0\.0\.1:(\d+) ", line)
        if found:
            return proc, int(found.group(1))
    proc.kill()
    raise SystemExit(f"the server from {root} did not start")


def main(argv: list[str] | None = None) -> int:
    """Run the measurement; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--attack", default="full_budget_calls")
    ap.add_argument("--seed", type=int, default=18)
    args = ap.parse_args(argv)
    attack = next(a for a in ATTACKS if a.name == args.attack)
    proc, port = start(args.root.resolve())
    try:
        probe("127.0.0.1", port)
        for _ in range(args.repeat):
            print(attack.run("127.0.0.1", port, np.random.default_rng(args.seed)), flush=True)
    finally:
        proc.terminate()
        proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
