"""The hostile clients of issue 18 against a real ``rt-lidar serve`` process, longer than the test.

    .venv/bin/python tools/fuzz/run.py --out fuzz.json [--rounds 3] [--seed 0] [--only NAME ...]
        [--preset VLP-16] [--scene street] [--fd-headroom 6] [--settle 1.5]

Starts the embedded server in its own process on loopback (paused), then for each round and each
attack of ``ATTACKS`` (``tools/fuzz/attacks.py``): runs it, probes with a normal client (ping plus one
``getLidarData``) until answered, and records the outcome, the attack's duration, the time to
recover, and the server's resident memory right after it and ``--settle`` s later (a normal client
also probes every 0.25 s while each attack runs: answered / tried and the slowest answer). With
``--fd-headroom N`` the server process is limited to N files more than it has open (``prlimit``), so
held connections run it out of descriptors (EMFILE in accept), as the issue's ``ulimit -n`` run.
Writes a JSON report and prints one line per attack; exits 1 when the server did not recover or died.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from attacks import ATTACKS, probe, rss_bytes, run_attack  # tools/fuzz/attacks.py, beside this script

from rt_lidar.server.serve import ServeOptions, start_server_process


def main(argv: list[str] | None = None) -> int:
    """Run the fuzz rounds; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("fuzz.json"))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", default=None, help="attack names (default: all)")
    ap.add_argument("--preset", default="VLP-16")
    ap.add_argument("--scene", default="street")
    ap.add_argument(
        "--fd-headroom",
        type=int,
        default=0,
        help="limit the server to N files above its open ones (0: as is)",
    )
    ap.add_argument("--recover-within", type=float, default=10.0, help="s a normal client may wait")
    ap.add_argument("--settle", type=float, default=1.5, help="s after an attack to read RSS again")
    args = ap.parse_args(argv)
    attacks = [a for a in ATTACKS if args.only is None or a.name in args.only]
    if not attacks:
        ap.error(f"--only names no attack; known: {', '.join(a.name for a in ATTACKS)}")
    proc, port = start_server_process(ServeOptions(port=0, scene=args.scene, preset=args.preset, paused=True))
    rows: list[dict[str, Any]] = []
    failed = False
    try:
        if args.fd_headroom:
            limit = len(os.listdir(f"/proc/{proc.pid}/fd")) + args.fd_headroom
            hard = resource.prlimit(proc.pid, resource.RLIMIT_NOFILE)[1]
            resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (limit, hard))
        probe("127.0.0.1", port)
        baseline = rss_bytes(proc.pid)
        print(f"server pid {proc.pid} port {port}: RSS {baseline / 2**20:.0f} MiB after a first probe")
        for rnd in range(args.rounds):
            for i, attack in enumerate(attacks):
                try:
                    res = run_attack(
                        attack, "127.0.0.1", port, args.seed + 1000 * rnd + i, args.recover_within
                    )
                except TimeoutError as exc:
                    failed = True
                    rows.append({"round": rnd, "name": attack.name, "error": str(exc)})
                    print(f"FAIL {exc}")
                    continue
                if proc.poll() is not None:
                    failed = True
                    print(f"FAIL the server exited ({proc.returncode}) after {attack.name}")
                    break
                rss = rss_bytes(proc.pid)
                time.sleep(args.settle)
                settled = rss_bytes(proc.pid)
                row = {
                    "round": rnd,
                    "item": attack.item,
                    "what": attack.what,
                    **asdict(res),
                    "rss_bytes": rss,
                    "rss_settled_bytes": settled,
                }
                rows.append(row)
                print(
                    f"{rnd} {attack.name:<19} {res.attack_s:5.2f} s  during {res.during_ok}/"
                    f"{res.during_tries} max {res.during_max_s:4.2f} s  recover {res.recover_s:4.2f} s  "
                    f"RSS {rss / 2**20:4.0f} -> {settled / 2**20:4.0f} MiB  {res.outcome}"
                )
        peak = _peak_rss(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
    report = {
        "argv": sys.argv,
        "seed": args.seed,
        "rounds": args.rounds,
        "fd_headroom": args.fd_headroom,
        "cpu_count": os.cpu_count(),
        "server_rss_baseline_bytes": baseline,
        "server_rss_peak_bytes": peak,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "attacks": rows,
    }
    args.out.write_text(json.dumps(report, indent=2))
    print(f"baseline {baseline / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB; wrote {args.out}")
    return 1 if failed else 0


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


if __name__ == "__main__":
    sys.exit(main())
