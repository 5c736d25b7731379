"""Every ray-casting engine that tools/bench/bench_casters.py measures agrees with World.cast on the same
small scene and lidar rays (engines that are not installed are skipped; embreex always is), and World's
fast static path (EmbreeCaster.intersect_into) gives exactly what the RayCaster protocol gives."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from rt_lidar.unreal_bridge.world import World, street_scene

BENCH = Path(__file__).resolve().parents[3] / "tools" / "bench"
T_FREEZE = 1.0
MAX_RANGE = 120.0


def _bench() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_casters", BENCH / "bench_casters.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def setup() -> dict[str, Any]:
    """The street frozen at t = 1 s, its flat mesh, World.cast's hits and 1/8 of one HDL-64E scan."""
    bench = _bench()
    scene = street_scene(0)
    o, d, _ = bench.lidar_rays(World(scene), "HDL-64E", 1)
    o, d = np.ascontiguousarray(o[::8]), np.ascontiguousarray(d[::8])
    fz = bench.frozen(scene, T_FREEZE)
    world = World(fz)
    v, f = bench.flat_mesh(fz)
    return {
        "bench": bench,
        "o": o,
        "d": d,
        "v": v,
        "f": f,
        "world": world,
        "hits": world.cast(o, d, T_FREEZE, MAX_RANGE),
    }


def _needs(module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception:  # not installed, or its native library does not load
        pytest.skip(f"{module} is not installed")


def _packets(s: dict[str, Any], **options: bool) -> Callable[..., Any]:
    from rt_lidar.unreal_bridge.world.raycast import embree_packets

    mod = embree_packets()
    if mod is None:
        pytest.skip("the compiled packet caster was not built (no C compiler at install)")
    return s["bench"].packet_engine(mod, s["v"], s["f"], MAX_RANGE, 8, **options)


def _open3d(s: dict[str, Any]) -> Callable[..., Any]:
    _needs("open3d")
    return s["bench"].open3d_engine(s["v"], s["f"], MAX_RANGE)


def _mitsuba(s: dict[str, Any]) -> Callable[..., Any]:
    _needs("mitsuba")
    try:
        return s["bench"].mitsuba_engine(s["v"], s["f"], MAX_RANGE, coherent=False)
    except (ImportError, RuntimeError) as exc:  # Dr.Jit finds no LLVM library here
        pytest.skip(f"mitsuba's LLVM backend does not start: {exc}")


ENGINES: dict[str, Callable[[dict[str, Any]], Callable[..., Any]]] = {
    "embreex": lambda s: s["bench"].embreex_engine(s["v"], s["f"], MAX_RANGE, robust=True),
    "embreex_nonrobust": lambda s: s["bench"].embreex_engine(s["v"], s["f"], MAX_RANGE, robust=False),
    "embree_packet8": _packets,
    "embree_packet8_medium": lambda s: _packets(s, high_quality=False),
    "embree_packet8_fast": lambda s: _packets(s, robust=False),
    "open3d": _open3d,
    "mitsuba_llvm": _mitsuba,
}


ROBUST_EMBREE = ("embreex", "embree_packet8", "embree_packet8_medium")
"""Robust Embree whatever the entry point and BVH quality (World builds at high quality since the ninth
session, embreex and the scans before it at medium): bit for bit World's hits."""


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_engine_agrees_with_world_cast(engine: str, setup: dict[str, Any]) -> None:
    cast = ENGINES[engine](setup)
    dist, face = cast(setup["o"], setup["d"])
    dist, face = np.asarray(dist), np.asarray(face)
    hits = setup["hits"]
    assert setup["bench"].agreement(hits.distance, dist) <= 2e-4  # non-robust mode may differ on an edge
    if engine in ROBUST_EMBREE:  # the same Embree, robust, as World's own BVH: the same hits bit for bit
        np.testing.assert_array_equal(dist.view(np.uint32), hits.distance.view(np.uint32))
        np.testing.assert_array_equal(face, _world_faces(setup))
    both = np.isfinite(dist) & np.isfinite(hits.distance)
    assert both.mean() > 0.9
    np.testing.assert_allclose(dist[both], hits.distance[both], rtol=1e-5, atol=1e-4)
    same_face = face[both] == _world_faces(setup)[both]
    assert same_face.mean() > 0.999


def _world_faces(s: dict[str, Any]) -> np.ndarray:
    """The static BVH's face of every ray (World keeps only material and object of a hit)."""
    dist = np.empty(s["o"].shape[0], np.float32)
    normal = np.empty((s["o"].shape[0], 3), np.float32)
    return s["world"]._static.intersect_into(s["o"], s["d"], MAX_RANGE, dist, normal)


class _ProtocolOnly:
    """A caster that offers only the RayCaster protocol (no intersect_into)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def intersect(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.intersect(*args, **kwargs)


@pytest.mark.parametrize("max_range", [MAX_RANGE, np.inf])
def test_fast_static_path_is_bitwise_the_protocol_path(setup: dict[str, Any], max_range: float) -> None:
    world: World = setup["world"]
    o, d = setup["o"], setup["d"]
    fast = world.cast(o, d, T_FREEZE, max_range)
    static = world._static
    world._static = _ProtocolOnly(static)
    try:
        slow = world.cast(o, d, T_FREEZE, max_range)
    finally:
        world._static = static
    for x, y in zip(fast, slow, strict=True):
        a, b = np.asarray(x), np.asarray(y)
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def test_intersect_into_matches_intersect(setup: dict[str, Any]) -> None:
    caster = setup["world"]._static
    o, d = setup["o"], setup["d"]
    limits = np.linspace(1.0, 150.0, o.shape[0]).astype(np.float32)
    for limit in (MAX_RANGE, np.inf, limits):
        dist, face, normal = caster.intersect(o, d, limit, threads=1)
        d2 = np.empty_like(dist)
        n2 = np.empty_like(normal)
        f2 = caster.intersect_into(o, d, limit, d2, n2)
        np.testing.assert_array_equal(f2, face)
        np.testing.assert_array_equal(d2.view(np.uint32), dist.view(np.uint32))
        np.testing.assert_array_equal(n2.view(np.uint32), normal.view(np.uint32))


def test_one_far_limit_is_filled_as_the_array_of_it(setup: dict[str, Any]) -> None:
    """faces_into fills one far limit straight into the distances: the same faces and distances as
    that limit given per ray (np.full, the array it filled them from before), a limit that float32
    rounds included; NaN is refused either way."""
    from rt_lidar.unreal_bridge.world.raycast import WorldError

    caster = setup["world"]._static
    o, d = setup["o"], setup["d"]
    for limit in (MAX_RANGE, 37.30000001, np.inf, -np.inf, 0):
        per_ray = np.full(o.shape[0], limit, np.float32)
        d1, d2 = np.empty(o.shape[0], np.float32), np.empty(o.shape[0], np.float32)
        f1 = caster.faces_into(o, d, limit, d1)
        f2 = caster.faces_into(o, d, per_ray if np.isfinite(limit) else limit, d2)
        np.testing.assert_array_equal(f1, f2)
        np.testing.assert_array_equal(d1.view(np.uint32), d2.view(np.uint32))
    with pytest.raises(WorldError, match="NaN"):
        caster.faces_into(o, d, float("nan"), np.empty(o.shape[0], np.float32))


@pytest.mark.parametrize("packets", [None, False], ids=["packets", "embreex"])
def test_the_fast_caster_is_embree_non_robust(setup: dict[str, Any], packets: bool | None) -> None:
    """``embree-fast`` casts the same scene in Embree's non-robust mode: the same hits within a
    millimetre but for a few edge rays, and many distances not bit for bit the robust ones."""
    from rt_lidar.unreal_bridge.world.raycast import EmbreeCaster, embree_packets

    if packets is None and embree_packets() is None:
        pytest.skip("the compiled packet caster was not built (no C compiler at install)")
    fast_world = World(setup["world"].scene, caster="embree-fast")
    assert isinstance(fast_world._static, EmbreeCaster) and not fast_world._static.robust
    if packets is False:
        fast_world._static = EmbreeCaster(setup["v"], setup["f"], packets=False, robust=False)
    fast = fast_world.cast(setup["o"], setup["d"], T_FREEZE, MAX_RANGE)
    robust = setup["hits"]
    assert setup["bench"].agreement(robust.distance, fast.distance) <= 2e-4
    assert (fast.distance.view(np.uint32) != robust.distance.view(np.uint32)).mean() > 0.05
    same = fast.object_index == robust.object_index
    assert same.mean() > 0.99
    np.testing.assert_array_equal(fast.segment[same], robust.segment[same])


def test_robust_hits_depend_on_the_instruction_set_in_their_last_bits(setup: dict[str, Any]) -> None:
    """World's robust packets with Embree held to the next lower instruction set (what
    ``bench_casters.py``'s ``robust_at_lower_isa`` measures): the same rays hit the same faces, but some
    distances move by a few float32 steps, as the non-robust mode's do."""
    probe = _isa_probe()
    pair = probe.isa_pair(probe.cpu_flags())
    if pair is None:
        pytest.skip("neither AVX-512 nor AVX2 on this CPU")
    here = np.asarray(_packets(setup)(setup["o"], setup["d"])[0])
    lower = probe.robust_distances_at(pair[1], setup["o"], setup["d"], setup["v"], setup["f"], MAX_RANGE)
    np.testing.assert_array_equal(np.isfinite(lower), np.isfinite(here))
    hit = np.isfinite(here)
    steps = probe.ulps_apart(here[hit], lower[hit])
    assert 0 < np.count_nonzero(steps) < steps.size  # the config reached Embree, and changed only some
    assert steps.max() <= 16


def test_a_device_config_after_the_device_is_made_is_refused() -> None:
    from rt_lidar.unreal_bridge.world.raycast import embree_library, embree_packets

    mod = embree_packets()
    if mod is None:
        pytest.skip("the compiled packet caster was not built (no C compiler at install)")
    with pytest.raises(RuntimeError, match="isa=avx2 comes too late"):
        mod.open_library(str(embree_library()), "isa=avx2")
    mod.open_library(str(embree_library()))  # without one: the device already made is kept


def test_the_isa_pair_follows_the_cpu_flags() -> None:
    probe = _isa_probe()
    skx = {"avx512f", "avx512cd", "avx512dq", "avx512bw", "avx512vl", "avx2", "fma", "bmi1", "bmi2"}
    assert probe.isa_pair(skx) == ("avx512", "avx2")
    assert probe.isa_pair(skx - {"avx512vl"}) == ("avx2", "sse4.2")  # Embree's AVX-512 needs all five
    assert probe.isa_pair({"sse4_2"}) is None


def _isa_probe() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    import embree_isa_probe

    return embree_isa_probe
