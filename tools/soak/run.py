"""Soak: a client pulling lidar data at full rate while hostile clients attack, memory and latency logged.

    .venv/bin/python tools/soak/run.py --seconds 3600 --out soak.json [--hostile 2] [--preset VLP-16]
        [--scene street] [--seed 0] [--doc docs/reliability.md]

Starts ``rt-lidar serve`` in its own process on loopback (running, not paused). One normal client
calls ``getLidarData`` back to back for ``--seconds``; ``--hostile`` threads run the attacks of
:data:`tools/fuzz/attacks.py`'s ``ATTACKS`` one after another (seeded, cycling). Every second the server's
resident memory and the normal client's calls of that second (count, p50 / p99 / max latency, errors)
are logged; the JSON report holds those samples, every attack's outcome and the totals. Exits 1 when
the server died or the normal client saw an error it could not recover from within 10 s. With
``--doc`` the totals also go into that Markdown file as a table, between the lines
``<!-- soak:begin -->`` and ``<!-- soak:end -->`` (appended when the file has no such lines).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.server.serve import ServeOptions, start_server_process
from rt_lidar.unreal_bridge import AirSimClient
from rt_lidar.unreal_bridge.errors import BridgeError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))  # the hostile clients: a tool
from attacks import ATTACKS, rss_bytes, run_attack


class FullRateClient:
    """``getLidarData`` back to back in a thread; latencies and errors per call, reconnecting on loss."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.calls: list[tuple[float, float]] = []  # (monotonic end, seconds)
        self.errors: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        client = AirSimClient("127.0.0.1", self.port, timeout=10.0)
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                client.get_lidar_data()
                self.calls.append((time.monotonic(), time.monotonic() - t0))
            except BridgeError as exc:
                self.errors.append((time.monotonic(), f"{type(exc).__name__}: {str(exc)[:120]}"))
                client.close()
                client = AirSimClient("127.0.0.1", self.port, timeout=10.0)
                self.stop.wait(0.05)
        client.close()


def _hostile(port: int, seed: int, stop: threading.Event, log: list[dict[str, Any]], t_start: float) -> None:
    i = 0
    while not stop.is_set():
        attack = ATTACKS[i % len(ATTACKS)]
        t = time.monotonic() - t_start
        try:
            res = run_attack(attack, "127.0.0.1", port, seed + i, recover_within_s=10.0)
            log.append(
                {
                    "t_s": round(t, 2),
                    "name": attack.name,
                    "attack_s": round(res.attack_s, 3),
                    "during": f"{res.during_ok}/{res.during_tries}",
                    "during_max_s": round(res.during_max_s, 3),
                    "recover_s": round(res.recover_s, 3),
                    "outcome": res.outcome,
                }
            )
        except TimeoutError as exc:
            log.append({"t_s": round(t, 2), "name": attack.name, "error": str(exc)})
        i += 1


def _window(calls: list[tuple[float, float]], t0: float, t1: float) -> dict[str, Any]:
    lat = np.array([s for end, s in calls if t0 <= end < t1])
    if lat.size == 0:
        return {"calls": 0}
    p50, p99 = np.percentile(lat, [50, 99])
    return {
        "calls": int(lat.size),
        "p50_ms": round(1e3 * p50, 2),
        "p99_ms": round(1e3 * p99, 2),
        "max_ms": round(1e3 * float(lat.max()), 2),
    }


DOC_BEGIN, DOC_END = "<!-- soak:begin -->", "<!-- soak:end -->"


def doc_table(report: dict[str, Any], out: Path) -> str:
    """The Markdown block of one soak ``report`` (written to ``out``): totals and RSS every 10 %."""
    t = report["totals"]
    samples = report["samples"]
    marks = [samples[min(len(samples) - 1, round(k * (len(samples) - 1) / 10))] for k in range(11)]
    rss_path = " / ".join(f"{s['rss_mib']:.0f}" for s in marks) if samples else "-"
    return "\n".join(
        [
            DOC_BEGIN,
            f"Run of {time.strftime('%d %B %Y %H:%M UTC', time.gmtime())}: `{' '.join(report['argv'])}` "
            f"({report['cpu_count']} cores, preset {report['preset']}; report `{out}`).",
            "",
            "| seconds | normal calls | errors (unrecovered) | latency p50 / p99 / max | "
            "server RSS start / max / end | attacks run (unrecovered) |",
            "|---|---|---|---|---|---|",
            f"| {t['seconds']:.0f} | {t['normal_calls']:,} | "
            f"{t['normal_errors']} ({t['unrecovered_errors']}) | "
            f"{t['latency_p50_ms']} / {t['latency_p99_ms']} / {t['latency_max_ms']} ms | "
            f"{t['rss_baseline_mib']} / {t['rss_max_mib']} / {t['rss_last_mib']} MiB | "
            f"{t['attacks_run']} ({t['attacks_unrecovered']}) |",
            "",
            f"Server RSS (MiB) at 0, 10, ..., 100 % of the run: {rss_path}.",
            DOC_END,
        ]
    )


def write_doc(doc: Path, block: str) -> None:
    """Put ``block`` between the soak markers of ``doc`` (or append it)."""
    text = doc.read_text() if doc.exists() else ""
    start, end = text.find(DOC_BEGIN), text.find(DOC_END)
    if start >= 0 and end > start:
        text = text[:start] + block + text[end + len(DOC_END) :]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    doc.write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Run the soak; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=Path("soak.json"))
    ap.add_argument("--hostile", type=int, default=1, help="hostile client threads")
    ap.add_argument("--preset", default="VLP-16")
    ap.add_argument("--scene", default="street")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--doc", type=Path, default=None, help="Markdown file to put the totals table in")
    args = ap.parse_args(argv)
    proc, port = start_server_process(ServeOptions(port=0, scene=args.scene, preset=args.preset))
    normal = FullRateClient(port)
    stop = threading.Event()
    attacks: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    died = False
    t_start = time.monotonic()
    try:
        baseline = rss_bytes(proc.pid)
        normal.thread.start()
        hostile = [
            threading.Thread(
                target=_hostile, args=(port, args.seed + 100_000 * k, stop, attacks, t_start), daemon=True
            )
            for k in range(args.hostile)
        ]
        for h in hostile:
            h.start()
        next_t = t_start + 1.0
        while time.monotonic() - t_start < args.seconds:
            time.sleep(max(0.0, next_t - time.monotonic()))
            if proc.poll() is not None:
                died = True
                print(f"the server exited ({proc.returncode})")
                break
            rss = rss_bytes(proc.pid)
            row = {
                "t_s": round(next_t - t_start, 1),
                "rss_mib": round(rss / 2**20, 1),
                **_window(normal.calls, next_t - 1.0, next_t),
                "errors": sum(1 for t, _ in normal.errors if next_t - 1.0 <= t < next_t),
            }
            samples.append(row)
            print(json.dumps(row), flush=True)
            next_t += 1.0
        stop.set()
        normal.stop.set()
        for h in hostile:
            h.join(30)
        normal.thread.join(15)
    finally:
        proc.terminate()
        proc.wait(10)
    lat = np.array([s for _, s in normal.calls]) if normal.calls else np.zeros(1)
    rss_series = [s["rss_mib"] for s in samples] or [0.0]
    # an error counts as unrecovered when no call succeeded within 10 s after it
    ends = np.array([end for end, _ in normal.calls])
    unrecovered = [e for e in normal.errors if not np.any((ends > e[0]) & (ends < e[0] + 10.0))]
    totals = {
        "seconds": round(time.monotonic() - t_start, 1),
        "normal_calls": len(normal.calls),
        "normal_errors": len(normal.errors),
        "unrecovered_errors": len(unrecovered),
        "latency_p50_ms": round(1e3 * float(np.percentile(lat, 50)), 2),
        "latency_p99_ms": round(1e3 * float(np.percentile(lat, 99)), 2),
        "latency_max_ms": round(1e3 * float(lat.max()), 2),
        "rss_baseline_mib": round(baseline / 2**20, 1),
        "rss_max_mib": max(rss_series),
        "rss_last_mib": rss_series[-1],
        "attacks_run": len(attacks),
        "attacks_unrecovered": sum(1 for a in attacks if "error" in a),
    }
    report = {
        "argv": sys.argv,
        "cpu_count": os.cpu_count(),
        "preset": args.preset,
        "totals": totals,
        "samples": samples,
        "attacks": attacks,
        "errors": normal.errors[:200],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    if args.doc is not None:
        write_doc(args.doc, doc_table(report, args.out))
    print(json.dumps(totals, indent=2))
    return 1 if died or unrecovered or totals["attacks_unrecovered"] else 0


if __name__ == "__main__":
    sys.exit(main())
