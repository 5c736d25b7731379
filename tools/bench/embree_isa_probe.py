"""How robust Embree's hit distances depend on the instruction set it runs with.

Embree picks its widest instruction set at run time, and its robust (watertight) triangle test divides
by a reciprocal estimate refined by one Newton step: ``rcp14`` with AVX-512, ``rcpps`` with AVX2 and
SSE. The estimates differ, so the same scene and rays give hit distances that differ in their last
bits between an AVX-512 machine and an AVX2 one. ``robust_distances_at`` casts the same rays, robust,
with Embree told to use a lower instruction set (its device config ``isa=...``), in a process of its
own (the device is made once a process), so ``bench_casters.py`` can put that difference beside the
non-robust mode's: the two are the same kind of change to a scan.

Child mode (what ``robust_distances_at`` runs): ``embree_isa_probe.py DIR ISA`` reads ``DIR/rays.npz``
and writes ``DIR/distance.npy``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from machine_record import cpu_flags  # tools/bench, beside this script

__all__ = ["cpu_flags", "isa_pair", "robust_distances_at", "ulps_apart"]

_AVX512_SKX = {"avx512f", "avx512cd", "avx512dq", "avx512bw", "avx512vl"}
_AVX2 = {"avx2", "fma", "bmi1", "bmi2"}


def isa_pair(flags: set[str]) -> tuple[str, str] | None:
    """(the instruction set Embree picks on a CPU with ``flags``, the next lower one to compare with),
    or None where neither AVX-512 nor AVX2 is there."""
    if flags >= _AVX512_SKX:
        return "avx512", "avx2"
    if flags >= _AVX2:
        return "avx2", "sse4.2"
    return None


def robust_distances_at(
    isa: str, o: np.ndarray, d: np.ndarray, v: np.ndarray, f: np.ndarray, max_range: float
) -> np.ndarray:
    """Hit distances (inf = miss) of the rays ``o``, ``d`` in the mesh ``v``, ``f``, cast as World's
    default caster casts them (robust, 8-wide packets, high-quality BVH) with Embree held to ``isa``."""
    with tempfile.TemporaryDirectory(prefix="rt-lidar-isa-") as tmp:
        np.savez(Path(tmp) / "rays.npz", o=o, d=d, v=v, f=f, max_range=np.float32(max_range))
        subprocess.run([sys.executable, __file__, tmp, isa], check=True)
        return np.load(Path(tmp) / "distance.npy", allow_pickle=False)


def ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many float32 steps apart each pair of positive finite distances is."""
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def _child(tmp: Path, isa: str) -> None:
    from rt_lidar.unreal_bridge.world import _embree_packets  # type: ignore[attr-defined]
    from rt_lidar.unreal_bridge.world.raycast import embree_library

    lib = embree_library()
    if lib is None:
        raise SystemExit("embree_isa_probe: no libembree4 from embreex here")
    _embree_packets.open_library(str(lib), f"isa={isa}")
    z = np.load(tmp / "rays.npz", allow_pickle=False)
    o, d = np.ascontiguousarray(z["o"], np.float32), np.ascontiguousarray(z["d"], np.float32)
    v, f = np.ascontiguousarray(z["v"], np.float32), np.ascontiguousarray(z["f"], np.uint32)
    scene = _embree_packets.new_scene(v, v.shape[0], f, f.shape[0], True, True)
    dist = np.full(o.shape[0], float(z["max_range"]), np.float32)
    face = np.empty(o.shape[0], np.int32)
    _embree_packets.intersect(scene, o, d, dist, face, 8)
    np.save(tmp / "distance.npy", dist)


if __name__ == "__main__":
    _child(Path(sys.argv[1]), sys.argv[2])
