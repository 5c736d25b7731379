"""Census of the rays glass costs: which glass ghosts' mirror rays and rays behind panes change a reported
return, and what each group of casts costs in thread CPU.

    PYTHONPATH=. .venv/bin/python tools/bench/glass_census.py [--rows vls128_dual_single_ray,...]
        [--frames 2] [--out FILE]

The street, seed 3, one sim frame after another in this thread (the source's cast on one thread), one
frame of warm-up. Each frame is cast once; every ``World.cast`` call is timed (``time.thread_time``) and
named by its caller: the first surfaces, the rays behind glass, the panes' mirror rays (the ghosts'),
the wet road's mirror rays. The physics then runs on copies of the same hits with the frame's own random
stream: as it is, with every glass ghost's power set to 0 (its echo column kept, so the noise draws are
the same), and with every behind-glass surface's echo set to 0. A pulse *changed* when the waveform
search's detections of it (return id, range, power, segment, flags: before range noise, whose draws
follow the number of points and so would move every later point) differ; a repeat of the first run is
the control (it must change none). Each mirror ray is counted by pane material, incidence cosine and
pane range, and against the largest ghost any material could give it: ``R(theta)^2`` times the largest
echo of every material at the pane's range and beyond (a few ranges and incidences), which is the
bound a cast could be skipped under.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROWS = ("vls128_dual_single_ray", "hdl64e_dual_rain25_beam_full")
_PANE_RANGES = ((0.0, 10.0), (10.0, 30.0), (30.0, float("inf")))
_COSINES = ((0.0, 0.3), (0.3, 0.7), (0.7, 1.01))


def _pipeline(row: str) -> Any:
    from rt_lidar.physics.model import PhysicsConfig
    from rt_lidar.physics.weather import WeatherConfig
    from rt_lidar.pipeline.builder import build_pipeline, build_world
    from rt_lidar.sensor.beam import BeamConfig

    if row == "vls128_dual_single_ray":
        preset, cfg = "VLS-128", PhysicsConfig(beam=BeamConfig(return_mode="dual"))
    else:
        beam = BeamConfig(return_mode="dual", full=True)
        preset, cfg = "HDL-64E", PhysicsConfig(beam=beam, weather=WeatherConfig(rain_mm_h=25.0))
    return build_pipeline(preset, build_world("street", seed=3), seed=3, physics=cfg).pipeline


def _pulse_keys(hits: Any, rows: np.ndarray, of_rays: bool = True) -> np.ndarray:
    """One int64 a pulse (its firing time and laser) for the rays ``rows`` of ``hits`` (``of_rays``
    False: ``rows`` are pulses already, as a detection's)."""
    pulse = rows // max(hits.subrays, 1) if of_rays else rows
    return hits.firings.t_ns[pulse].astype(np.int64) * 1024 + hits.firings.ring[pulse].astype(np.int64)


def _ghost_bound(echo: Any, hits: Any, rows: np.ndarray, max_m: float) -> np.ndarray:
    """The largest ghost any material could give the mirror rays of ``rows``: R(theta)^2 times the largest
    echo of every material at 1-10 x the pane's range (within the sensor's), incidence cosines 1, 0.7, 0.3."""
    from rt_lidar.physics.glass_ghost import mirror_r0
    from rt_lidar.sensor.glazing import pane_mirror_reflectance

    r0 = mirror_r0(echo.materials)[hits.glass_material[rows]]
    r = pane_mirror_reflectance(r0, hits.glass_cos[rows].astype(np.float64))
    extra = (r * r).astype(np.float32)
    best = np.zeros(rows.size)
    pane = hits.glass_range_m[rows]
    for f in (1.0, 1.05, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0):
        rng = np.minimum(pane * f, max_m).astype(np.float32)
        for c in (1.0, 0.7, 0.3):
            for m in range(len(echo.materials.specular_gain)):
                mat = np.full(rows.size, m, np.int16)
                p, _ = echo.power(rng, np.full(rows.size, c, np.float32), mat, extra)
                best = np.maximum(best, p)
    return best


class _Census:
    """The hooks (cast timing, ghost and behind-glass switches, detections by pulse) and the counts."""

    def __init__(self, pipe: Any) -> None:
        import rt_lidar.physics.beam_full as beam_full
        import rt_lidar.physics.model as model
        import rt_lidar.physics.returns as returns

        self.pipe = pipe
        self.cast_ms: dict[str, float] = collections.defaultdict(float)
        self.cast_rays: dict[str, int] = collections.defaultdict(int)
        self.counts: dict[str, int] = collections.Counter()
        self.groups: dict[str, dict[str, int]] = collections.defaultdict(collections.Counter)
        self.ghosts = "on"  # on / log / off
        self.logged: list[dict[str, np.ndarray]] = []
        self.detections: list[np.ndarray] = []
        world = pipe.source.world
        cast, ghost_echoes, detect = world.cast, returns.glass_ghost_echoes, returns.waveform_detections

        def timed_cast(o: Any, d: Any, t: Any, max_range: float = np.inf, threads: Any = None) -> Any:
            caller = sys._getframe(1)
            site = caller.f_code.co_name
            if site == "_mirror_cast" and caller.f_back is not None:
                site = (
                    "mirror rays of the panes"
                    if caller.f_back.f_code.co_name == "_glass_mirror"
                    else "wet road mirror"
                )
            elif site == "_cast":
                site = "behind glass" if "rh" in caller.f_locals else "first surfaces"
            c = time.thread_time()
            out = cast(o, d, t, max_range, threads=threads)
            self.cast_ms[site] += 1e3 * (time.thread_time() - c)
            self.cast_rays[site] += len(o)
            return out

        def switched_ghosts(echo: Any, hits: Any) -> Any:
            got = ghost_echoes(echo, hits)
            if got is None or self.ghosts == "on":
                return got
            g_r, g_p, g_s, g_seg = got
            if self.ghosts == "off":
                return g_r, np.zeros_like(g_p), g_s, g_seg
            rows = np.flatnonzero(hits.glass_material >= 0)
            self.logged.append(
                {
                    "key": _pulse_keys(hits, rows),
                    "material": hits.glass_material[rows],
                    "cos": hits.glass_cos[rows],
                    "pane_m": hits.glass_range_m[rows],
                    "hit": np.isfinite(g_r[rows]) & (g_p[rows] > 0),
                    "power": g_p[rows],
                    "bound": _ghost_bound(echo, hits, rows, pipe.preset.range.max_m),
                }
            )
            return got

        def logged_detections(echo: Any, hits: Any, *a: Any, **kw: Any) -> Any:
            det = detect(echo, hits, *a, **kw)
            key = _pulse_keys(hits, det.pulse, of_rays=False)
            fields = [key, det.return_id, det.range_m, det.power_w, det.segment, det.flags]
            self.detections.append(np.rec.fromarrays(fields))
            return det

        world.cast = timed_cast
        returns.glass_ghost_echoes = switched_ghosts
        model.waveform_detections = beam_full.waveform_detections = logged_detections

    def by_pulse(self, hits: Any, frame: int, behind: bool = False) -> dict[int, list[bytes]]:
        """The detections of each pulse of a copy of ``hits`` (``behind``: the behind-glass echoes 0)."""
        echo_type = type(self.pipe.physics.echo)
        plain = echo_type.object_echoes

        def without_behind(echo: Any, h: Any) -> Any:
            power, *rest = plain(echo, h)
            power = power.copy()
            power[h.glass_material >= 0] = 0
            return (power, *rest)

        self.detections.clear()
        if behind:
            echo_type.object_echoes = without_behind
        try:
            self.pipe.physics.apply(copy.deepcopy(hits), self.pipe._rng(frame))
        finally:
            echo_type.object_echoes = plain
        out: dict[int, list[bytes]] = collections.defaultdict(list)
        for rec in self.detections:
            size, raw = rec.dtype.itemsize, rec.tobytes()
            for i, k in enumerate(rec["f0"].tolist()):
                out[k].append(raw[i * size : (i + 1) * size])
        return out

    def frame(self, hits: Any, frame: int, control: bool) -> None:
        """Count one cast frame."""
        self.ghosts, self.logged = "log", []
        base = self.by_pulse(hits, frame)
        self.ghosts = "off"
        no_ghosts = self.by_pulse(hits, frame)
        self.ghosts = "on"
        no_behind = self.by_pulse(hits, frame, behind=True)
        if control:
            again = self.by_pulse(hits, frame)
            self.counts["control: pulses changed by running again"] += _changed(base, again).size
        by_ghost = _changed(base, no_ghosts)
        self.counts["pulses with detections"] += len(base)
        self.counts["pulses changed by their ghost"] += by_ghost.size
        self.counts["pulses changed by their behind-glass echo"] += _changed(base, no_behind).size
        gm = hits.glass_material >= 0
        self.counts["rays meeting glass first"] += int(gm.sum())
        self.counts["of those: a surface behind"] += int((gm & (hits.material >= 0)).sum())
        thr = self.pipe.preset.pulse.detection_threshold_w
        names = self.pipe.source.material_names
        for g in self.logged:
            changed = np.isin(g["key"], by_ghost) & g["hit"]
            self.counts["mirror rays"] += g["key"].size
            self.counts["mirror rays meeting a surface"] += int(g["hit"].sum())
            self.counts["mirror rays whose pulse changed"] += int(changed.sum())
            self.counts["mirror rays: bound below the threshold"] += int((g["bound"] < thr).sum())
            groups = [(f"pane of {names[m]}", g["material"] == m) for m in np.unique(g["material"]).tolist()]
            groups += [(f"cos [{a}, {b})", (g["cos"] >= a) & (g["cos"] < b)) for a, b in _COSINES]
            groups += [
                (f"pane range [{a}, {b}) m", (g["pane_m"] >= a) & (g["pane_m"] < b)) for a, b in _PANE_RANGES
            ]
            for name, sel in groups:
                c = self.groups[name]
                c["cast"] += int(sel.sum())
                c["met a surface"] += int((sel & g["hit"]).sum())
                c["ghost >= threshold"] += int((sel & (g["power"] >= thr)).sum())
                c["pulse changed"] += int((sel & changed).sum())
                c["pulse changed, ghost < 0.05 threshold"] += int(
                    (sel & changed & (g["power"] < 0.05 * thr)).sum()
                )
                c["pulse changed, ghost < 0.001 threshold"] += int(
                    (sel & changed & (g["power"] < 1e-3 * thr)).sum()
                )


def _changed(a: dict[int, list[bytes]], b: dict[int, list[bytes]]) -> np.ndarray:
    keys = [k for k in set(a) | set(b) if a.get(k) != b.get(k)]
    return np.array(sorted(keys), np.int64)


def census(row: str, frames: int) -> dict[str, Any]:
    """The census of ``row`` over ``frames`` street frames (after one of warm-up), counts a frame."""
    from rt_lidar.sensor.scan_pattern import firings_between

    pipe = _pipeline(row)
    pipe.source.cast_threads = 1
    c = _Census(pipe)
    try:
        for k in range(frames + 1):
            if k == 1:
                c.cast_ms.clear()
                c.cast_rays.clear()
            t0, t1 = pipe.frame_interval(k + 1)
            hits = pipe.source.hits(firings_between(pipe.preset, t0, t1), t0, t1)
            if k:
                c.frame(hits, k, control=k == 1)
    finally:
        pipe.close()
    per = 1.0 / frames
    return {
        "row": row,
        "frames": frames,
        "counts_per_frame": {k: round(v * per, 1) for k, v in c.counts.items()},
        "mirror_rays_by_group_per_frame": {
            g: {k: round(v * per, 1) for k, v in d.items()} for g, d in c.groups.items()
        },
        "casts_per_frame": {
            s: {"rays": round(c.cast_rays[s] * per), "thread_cpu_ms": round(c.cast_ms[s] * per, 2)}
            for s in c.cast_ms
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    parser.add_argument("--frames", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = [r for r in args.rows.split(",") if r]
    unknown = [r for r in rows if r not in ROWS]
    if unknown or args.frames < 1:
        bad = f"unknown row {unknown[0]!r} (known: {', '.join(ROWS)})" if unknown else "--frames must be >= 1"
        print(f"glass_census: {bad}", file=sys.stderr)
        return 2
    import os

    got = {"load_average_before": list(os.getloadavg()), "rows": [census(r, args.frames) for r in rows]}
    got["load_average_after"] = list(os.getloadavg())
    text = json.dumps(got, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
