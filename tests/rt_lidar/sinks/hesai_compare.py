"""Shared checks of the Hesai packet tests: which return of each firing a packet holds, and how far a
decoded point lies from ours."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from rt_lidar.sinks.pcap import DEFAULT_EPOCH_NS


def pick_returns(points: np.ndarray, last: bool) -> np.ndarray:
    """Index of the farthest (``last``) or strongest return of every (t, ring) firing of one scan."""
    r = points["x"].astype(np.float64) ** 2 + points["y"] ** 2 + points["z"] ** 2
    level = np.clip(np.round(points["intensity"]), 0, 255)
    units = np.round(np.sqrt(r).astype(np.float32) / np.float32(0.004))
    keys = (r, points["ring"], points["t"]) if last else (-units, level, points["ring"], points["t"])
    order = np.lexsort(keys)
    order = order[(units[order] >= 1) & (units[order] <= 65535)]  # what a uint16 distance holds
    key = points["t"][order] * 4096 + points["ring"][order]
    return np.sort(order[np.r_[key[1:] != key[:-1], True]])


def compare_points(
    dec: np.ndarray, ours: np.ndarray, starts: np.ndarray | None = None, fire_us: np.ndarray | None = None
) -> dict[str, float]:
    """Match each decoded point (rows of x, y, z, intensity, ring[, firing time s]) to ours (same ring
    and range unit, nearest azimuth); the worst differences in range, azimuth and elevation, and with
    ``fire_us`` (each channel's firing offset the decoder adds) the worst decoded firing time less it
    against ours (``t_us``). ``starts``: each of our points' scan start (ns), needed with ``fire_us``."""
    rng32 = np.sqrt(ours["x"] ** 2 + ours["y"] ** 2 + ours["z"] ** 2).astype(np.float32)
    units = np.round(rng32 / np.float32(0.004)).astype(int)
    by_key: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, key in enumerate(zip(ours["ring"].tolist(), units.tolist(), strict=True)):
        by_key[key].append(i)
    o_az = np.degrees(np.arctan2(ours["y"], ours["x"]))
    o_el = np.degrees(np.arcsin(ours["z"] / rng32))
    if fire_us is not None:
        assert starts is not None, "the firing times need each point's scan start"
        o_wall_s = (starts + ours["t"].astype(np.int64) + DEFAULT_EPOCH_NS) / 1e9
    d_r = np.linalg.norm(dec[:, :3], axis=1)
    d_az = np.degrees(np.arctan2(dec[:, 1], dec[:, 0]))
    d_el = np.degrees(np.arcsin(dec[:, 2] / d_r))
    worst = {"az": 0.0, "el": 0.0, "r": 0.0}
    dt_s = np.empty(len(dec))
    for k in range(len(dec)):
        ring = int(dec[k, 4])
        cand = by_key[(ring, round(d_r[k] / 0.004))]
        assert cand, f"decoded point {k} has no point of ours on its ring at its range"
        diff = np.abs((d_az[k] - o_az[cand] + 180.0) % 360.0 - 180.0)
        j = cand[int(np.argmin(diff))]
        worst["az"] = max(worst["az"], float(diff.min()))
        worst["el"] = max(worst["el"], abs(float(d_el[k] - o_el[j])))
        worst["r"] = max(worst["r"], abs(float(d_r[k] - rng32[j])))
        same = np.asarray(cand)[diff < 0.01]  # the same beam in both scans of a still world
        assert dec[k, 3] in np.clip(np.round(ours["intensity"][same]), 0, 255)
        if fire_us is not None:  # a decoder may read the tail's date as local time: whole minutes off
            off = dec[k, 5] - fire_us[ring] * 1e-6 - o_wall_s[same]
            dt_s[k] = float(np.min(np.abs((off + 30.0) % 60.0 - 30.0)))
    if fire_us is not None:
        worst["t_us"] = float(dt_s.max() * 1e6)
    return worst
