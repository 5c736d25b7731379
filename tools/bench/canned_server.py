"""A server that answers instantly: real ``rtLidarGetHits`` answers recorded once, then replayed.

    .venv/bin/python tools/bench/canned_server.py record --preset HDL-64E --out /tmp/hdl64.npz
    .venv/bin/python tools/bench/canned_server.py serve --answers /tmp/hdl64.npz [--cpu 1]

``record`` runs the embedded street (seed 0, paused) for one rotation of the sensor at f_sim and keeps
what its backend answers: the first, empty sweep (the controller's probe) and the rotation's sim
frames. ``serve`` answers them from a tiny loopback :class:`~rt_lidar.unreal_bridge.AirSimServer` (its line
``canned server on 127.0.0.1:PORT`` on stdout): call k > 0 gets sim frame ``(k - 1) % n`` of the
rotation, its times moved on by whole rotations, so a lockstep controller sees the schedule it expects
and builds whole scans; nothing is cast. ``rtLidarGetHits`` is answered from answers encoded once
(:func:`prepacked`: only the times change), so the server costs little more than the transfer;
``rtLidarGetBeamHits`` (the shared-memory path) encodes each answer into the client's segment as a
real server does.

Used by ``bench_shm_transfer.py`` and ``bench_controller_cost.py``; :func:`start_canned_server` starts
one in its own process.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.pipeline.builder import build_world
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import schedule_digest
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimServer, FluPose, LidarHits
from rt_lidar.unreal_bridge.hits_codec import encode_hits, hits_options
from rt_lidar.unreal_bridge.wire import LEAN_FIELDS, OMITTABLE_FIELDS

ROOT = Path(__file__).resolve().parents[2]
_CORE = ("points", "normals", "segmentation", "ring", "time", "range", "miss")


def record(preset_name: str, out: Path, sim_hz: float = 20.0, scene: str = "street") -> None:
    """Record the probe and one rotation of sim frames of ``preset_name`` on ``scene`` to ``out``."""
    preset = load_preset(preset_name)
    hz = preset.scan.rotation_hz
    if hz is None:
        raise SystemExit(f"{preset_name}: not a rotating sensor")
    frames = round(sim_hz / hz)
    if abs(frames * hz - sim_hz) > 1e-9 or round(1e9 / sim_hz) * sim_hz != 1e9:
        raise SystemExit(f"f_sim {sim_hz} Hz must be a whole multiple of the rotation ({hz} Hz)")
    sim = EmbeddedSim(build_world(scene, seed=0), preset, paused=True)
    answers = [sim.lidar_hits("", "")]
    for _ in range(frames):
        sim.continue_for_time(1.0 / sim_hz)
        answers.append(sim.lidar_hits("", ""))
    arrays: dict[str, np.ndarray] = {}
    meta: list[dict[str, Any]] = []
    for i, a in enumerate(answers):
        for name in _CORE:
            arrays[f"{i}/{name}"] = np.asarray(getattr(a, name))
        for name, v in a.extras.items():
            arrays[f"{i}/x/{name}"] = np.asarray(v)
        meta.append(
            {
                "pose": [list(a.pose.position), list(a.pose.orientation)],
                "time_stamp": a.time_stamp,
                # the pose samples go only to a client that asks (a rig's crosstalk): not replayed
                "info": {k: v for k, v in a.info.items() if k != "pose_samples"},
                "extras": list(a.extras),
            }
        )
    period_ns = frames * round(1e9 / sim_hz)
    head = {"preset": preset.name, "sim_hz": sim_hz, "period_ns": period_ns, "answers": meta}
    arrays["meta"] = np.frombuffer(json.dumps(head).encode(), np.uint8)
    savez: Any = np.savez  # (its stub types the keyword arrays as its allow_pickle flag)
    savez(out, **arrays)


def load_answers(path: Path) -> tuple[dict[str, Any], list[LidarHits]]:
    """The header and the answers :func:`record` wrote."""
    with np.load(path) as z:
        head = json.loads(z["meta"].tobytes())
        answers = []
        for i, m in enumerate(head["answers"]):
            core = {name: z[f"{i}/{name}"] for name in _CORE}
            extras = {name: z[f"{i}/x/{name}"] for name in m["extras"]}
            pos, quat = m["pose"]
            pose = FluPose(tuple(pos), tuple(quat))
            answers.append(
                LidarHits(**core, pose=pose, time_stamp=m["time_stamp"], extras=extras, info=m["info"])
            )
    return head, answers


class CannedSim:
    """The recorded answers as a backend: nothing cast, every lidar call answered from memory."""

    def __init__(self, head: dict[str, Any], answers: list[LidarHits]) -> None:
        self.period_ns = int(head["period_ns"])
        self.digest = schedule_digest(load_preset(str(head["preset"])))
        self.probe, self.frames = answers[0], answers[1:]
        self.calls = 0
        self.paused = True

    def firing_digests(self) -> dict[str, str]:
        """The recorded preset's schedule digest (as our server gives it): a lockstep controller on the
        same schedule asks the answers to leave the firings out, as it does of ``rt-lidar serve``."""
        return {} if self.digest is None else {"": self.digest}

    def lidar_hits(self, lidar_name: str, vehicle_name: str) -> LidarHits:
        k, self.calls = self.calls, self.calls + 1
        if k == 0:
            return self.probe
        rot, i = divmod(k - 1, len(self.frames))
        a, shift = self.frames[i], rot * self.period_ns
        if shift == 0:
            return a
        info = dict(a.info)
        info["t0_ns"] += shift
        info["t1_ns"] += shift
        info["frame"] = k
        return dataclasses.replace(
            a, time=a.time + np.int64(shift), time_stamp=a.time_stamp + shift, info=info
        )

    def lidar_beam_hits(
        self, lidar_name: str, vehicle_name: str, offsets_rad: Any, weights: Any, sun: Any = None
    ) -> LidarHits:
        return self.lidar_hits(lidar_name, vehicle_name)

    def reset(self) -> None:
        self.calls = 0

    def pause(self, paused: bool) -> None:
        self.paused = paused

    def is_paused(self) -> bool:
        return self.paused

    def continue_for_time(self, seconds: float) -> None:
        pass

    def continue_for_frames(self, frames: int) -> None:
        pass

    def list_vehicles(self) -> list[str]:
        return [""]


def prepacked(sim: CannedSim) -> Any:
    """An ``rtLidarGetHits`` handler answering ``sim``'s calls from answers encoded once (only the
    firing times, the time stamp and the header change between rotations): the same answer
    :func:`~unreal_bridge.hits_codec.encode_hits` gives for each call, without its per-call encoding."""
    answers = [sim.probe, *sim.frames]
    sets: tuple[frozenset[str], ...] = (frozenset(), OMITTABLE_FIELDS, LEAN_FIELDS)
    forms = [(o, c) for o in sets for c in (False, True)]
    by_form = {(o, c): [encode_hits(a, omit=o, compact=c) for a in answers] for o, c in forms}

    def handler(lidar_name: Any, vehicle_name: Any, options: Any = None) -> dict[str, Any]:
        omit, compact = hits_options(options)
        encoded = by_form.get((omit, compact))
        if encoded is None:
            encoded = [encode_hits(a, omit=omit, compact=compact) for a in answers]
        k, sim.calls = sim.calls, sim.calls + 1
        if k == 0:
            return encoded[0]
        rot, i = divmod(k - 1, len(sim.frames))
        base, shift = encoded[1 + i], rot * sim.period_ns
        if shift == 0:
            return base
        info = dict(base["info"])
        info["t0_ns"] += shift
        info["t1_ns"] += shift
        info["frame"] = k
        fields = dict(base["fields"])
        t = fields.get("time")  # (left out for a controller on the same schedule)
        if t is not None:
            fields["time"] = {**t, "data": (np.frombuffer(t["data"], "<i8") + np.int64(shift)).tobytes()}
        return {**base, "time_stamp": base["time_stamp"] + shift, "info": info, "fields": fields}

    return handler


def start_canned_server(
    answers: Path, cpu: int | None = None, prepack: bool = True
) -> tuple[subprocess.Popen[str], int]:
    """``serve`` in its own process (pinned to ``cpu`` when given; ``prepack=False``: every answer
    encoded per call, as a real server does); returns the process and its port."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "serve", "--answers", str(answers)]
    if not prepack:
        cmd.append("--encode-each-call")
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"on 127\.0\.0\.1:(\d+)", line)
    if not found:
        proc.kill()
        raise SystemExit(f"the canned server did not start: {line!r}")
    return proc, int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--preset", default="HDL-64E")
    r.add_argument("--sim-hz", type=float, default=20.0)
    r.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("serve")
    s.add_argument("--answers", type=Path, required=True)
    s.add_argument("--cpu", type=int, default=None)
    s.add_argument("--encode-each-call", action="store_true", help="no prepacked rtLidarGetHits answers")
    args = ap.parse_args()
    if args.cmd == "record":
        record(args.preset, args.out, args.sim_hz)
        return
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    head, answers = load_answers(args.answers)
    sim = CannedSim(head, answers)
    server = AirSimServer(sim, port=0)  # type: ignore[arg-type]
    if not args.encode_each_call:
        server.rpc.register("rtLidarGetHits", prepacked(sim), (2, 3))
    server.start()
    print(f"canned server on 127.0.0.1:{server.port} ({head['preset']})", flush=True)
    try:
        sys.stdin.read()  # until the parent goes
    finally:
        server.close()
    time.sleep(0)


if __name__ == "__main__":
    main()
