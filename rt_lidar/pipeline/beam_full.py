"""``--beam full``: the divergent beam where it matters, one exact ray elsewhere.

A dense sub-ray bundle (19 sub-rays) gives multi-echo at depth edges, blooming of retro-reflectors, the
echo pulse width of surfaces the footprint crosses at a slant, and the double echo of glass; but most
pulses meet one surface square on, where the bundle's sub-rays all say what the central ray says. Here
every pulse's central ray is cast first; :func:`bundle_pulses` picks from those central hits, and their
neighbours in ring and azimuth, the pulses whose footprint may meet

- a depth edge: a neighbour's central ray misses where this one hits (or the other way round), or the
  two ranges differ by more than the footprint can hold on one smooth surface: the range difference
  scaled down to the footprint's angular size (``|dr| * footprint / spacing``) exceeds ``spread_m``
  (the pulse's length in range, c * width / 2: the echo widens and parts beyond it); between two
  objects (their segments differ) the unscaled range difference counts against ``edge_m`` (half the
  pulse's length), since the step may lie anywhere between the two rays, in either footprint;
- the edge of a transmissive surface (glass): a neighbour's ray passes glass where this one does not,
  or their glass ranges part as above;
- the edge of a retro-reflector (a retro lobe above :data:`RETRO_GAIN_MIN`: sheeting, not a road
  marking): a neighbour's ray ends on one where this one does not (the target reaches into one of the
  two footprints: it blooms there);

and each pulse so marked casts one probe ray at its footprint's rim toward the neighbour that marked
it (:mod:`rt_lidar.pipeline.beam_probe`): only the pulses whose probe sees the step within the footprint
are cast again as the whole bundle (:attr:`~rt_lidar.pipeline.sources.Hits.bundle`). A pulse whose
central ray ends in a volume of scatterers (a material with ``volume = true``: a tree crown's leaves)
gets the bundle without a neighbour or a probe (:func:`volume_marks`): its footprint straddles leaves at
many depths, and the bundle's echo is as wide as they lie deep.
The rest keep the central ray as one sub-ray of full weight: the single-ray model exactly. Inside a
glass pane or a retro-reflective sign every sub-ray meets what the central ray meets (the same glass,
the same sheeting, the same surface behind), so the bundle would only repeat it; the measured
statistics agree with the dense bundle's within :data:`rt_lidar.validation.beam_full_check.TOLERANCES`
(docs/beam-full.md). The physics
(:mod:`rt_lidar.physics.beam_full`) runs each group its own way and merges the returns in pulse order.

Neighbours are looked for among the firings of one sim frame (a frame's first and last column have one
azimuth neighbour fewer; their ring neighbours still count).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rt_lidar.sensor.beam import FULL_BEAM_SUB_RAYS, SubRayPattern, subray_pattern
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import Firings

if TYPE_CHECKING:
    from rt_lidar.backend.source_ops import NumpySourceOps
    from rt_lidar.pipeline.frame_loop import Pipeline
    from rt_lidar.pipeline.sources import BeamGrant, Hits, WorldSource
    from rt_lidar.unreal_bridge.beam_call import SunArg

__all__ = [
    "FULL_BEAM_SUB_RAYS",
    "SPARSE_SUB_RAYS",
    "BundleCounts",
    "BundleStats",
    "FullBeamPlan",
    "FullBeamSource",
    "beam_summary",
    "bundle_pulses",
    "bundle_that_runs",
    "full_beam_hits",
    "full_beam_plan",
    "nearest_in_ring",
    "neighbour_marks",
    "neighbour_steps",
    "plan_of_pattern",
    "ring_ranks",
    "ring_sorted",
    "sparse_bundle_fits",
    "take_firings",
    "take_pulses",
    "use_full_beam",
    "volume_marks",
]

EDGE_PULSE_FRACTION = 0.5
"""Default ``edge_m``: this share of the pulse's length in range (c * width / 2)."""
SPREAD_PULSE_FRACTION = 1.0
"""``spread_m``: this share of the pulse's length in range (c * width / 2)."""
NEIGHBOUR_MAX_DEG = 2.0
"""Firings farther apart than this (in azimuth) are not neighbours (a frame's gap, the seam)."""

_C_M_PER_NS = 0.299792458


REASONS = ("edge", "glass", "retro", "volume", "beside_volume", "behind_glass")
"""Why a pulse got the bundle (summary.json's ``bundled_by_reason``; a pulse may have several)."""

RETRO_GAIN_MIN = 10.0
"""A material is a retro-reflector here (its edge calls for the bundle) when its retro lobe's gain exceeds
ten white Lambertians': retro-reflective sheeting (number plates 300, signs 600) blooms wherever a
sub-ray meets it. Road markings' glass beads (gain 2, exponent 1.5) brighten paint head-on, but a road
is met at grazing incidence (beyond 3.6 m of a 1.73 m mount, incidence > 61 deg), where the marking's
effective reflectance 0.72 cos + 2 cos^1.5 stays below a white target's: its edge is an albedo step like
any other paint's, which the bundle is not cast for. On the street with an HDL-64E that edge was 9 of 10
pulses bundled for a retro-reflector alone (about 1 % of all pulses) and none of them bloomed in the
bundle (docs/beam-full.md, "Lane markings are no retro-reflectors"). The backscatter of rough asphalt,
concrete and rock (0.05-0.07, issue 40) and of leaves (0.17-0.2) is a texture, not a reflector."""


@dataclass(frozen=True)
class BundleCounts:
    """One frame's ``--beam full`` choice (:attr:`~rt_lidar.pipeline.sources.Hits.bundle_counts`): its
    pulses, how many of them were cast as the bundle, and why (a pulse may have several reasons)."""

    pulses: int
    bundled: int
    by_reason: dict[str, int]


@dataclass
class BundleStats:
    """The sum of :class:`BundleCounts` over the frames a pipeline handed on
    (:attr:`~rt_lidar.pipeline.frame_loop.Pipeline.bundle_stats`): the frames the scans were made of,
    never one cast ahead and dropped, so the same run counts the same however far ahead its frames were
    cast (thread-safe counts)."""

    pulses: int = 0
    bundled: int = 0
    by_reason: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, frame: BundleCounts) -> None:
        """Count one frame."""
        with self._lock:
            self.pulses += frame.pulses
            self.bundled += frame.bundled
            for k, v in frame.by_reason.items():
                self.by_reason[k] = self.by_reason.get(k, 0) + v

    def as_dict(self) -> dict[str, Any]:
        """The summary.json form: pulses, bundled, their share and why (a pulse may have several reasons)."""
        with self._lock:
            share = self.bundled / self.pulses if self.pulses else 0.0
            return {
                "pulses": self.pulses,
                "bundled_pulses": self.bundled,
                "bundled_share": share,
                "bundled_by_reason": dict(self.by_reason),
            }


@dataclass(frozen=True)
class FullBeamPlan:
    """What ``--beam full`` needs to choose and cast: the bundle, the materials that call for it and the
    thresholds."""

    pattern: SubRayPattern
    retro: np.ndarray  # (M,) bool per world material: a retro-reflector (gain > RETRO_GAIN_MIN)
    footprint_rad: float
    """Full angular size of the footprint the bundle samples (largest sub-ray offset, both sides)."""
    edge_m: float
    """Range step between two objects' neighbouring rays that calls for the bundle (module docstring)."""
    spread_m: float
    """Range spread over the footprint on one surface that calls for the bundle (module docstring)."""
    bundle: str = "dense"
    """``dense``: ``pattern`` is the bundle asked for; ``sparse``: :func:`~rt_lidar.pipeline.beam_sparse.
    sparse_bundle` of it (its rim thinned to every other sub-ray, each weighted for two)."""
    stands_for: int = 0
    """Sub-rays of the dense bundle ``pattern`` stands for (its own count when ``dense``; 0: the same)."""
    volume: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    """(M,) bool per world material: a volume of scatterers (:func:`volume_marks`; empty: none)."""


def full_beam_plan(
    preset: SensorPreset,
    retro_gain: np.ndarray,
    sub_rays: int = FULL_BEAM_SUB_RAYS,
    edge_m: float | None = None,
    bundle: str = "dense",
    volume: np.ndarray | None = None,
) -> FullBeamPlan:
    """The plan of ``preset`` for a world whose materials have ``retro_gain``
    (:class:`~rt_lidar.sensor.materials.MaterialArrays`; glass is found from the hits themselves);
    ``edge_m`` None takes :data:`EDGE_PULSE_FRACTION` of the pulse's length. ``bundle`` ``sparse`` casts
    :func:`~rt_lidar.pipeline.beam_sparse.sparse_bundle` of the ``sub_rays`` bundle where
    :func:`sparse_bundle_fits` it (the dense bundle otherwise: :func:`bundle_that_runs`); ``volume`` the
    materials' :attr:`~rt_lidar.sensor.materials.MaterialArrays.volume` flags (None: none)."""
    if edge_m is None:
        edge_m = EDGE_PULSE_FRACTION * preset.pulse.width_ns * _C_M_PER_NS / 2.0
    spread_m = SPREAD_PULSE_FRACTION * preset.pulse.width_ns * _C_M_PER_NS / 2.0
    pattern = subray_pattern(preset, sub_rays)
    if bundle_that_runs(sub_rays, bundle) == "sparse":
        from rt_lidar.pipeline.beam_sparse import sparse_bundle

        plan = plan_of_pattern(sparse_bundle(pattern), retro_gain, edge_m, spread_m, volume)
        return dataclasses.replace(plan, bundle="sparse", stands_for=sub_rays)
    plan = plan_of_pattern(pattern, retro_gain, edge_m, spread_m, volume)
    return dataclasses.replace(plan, stands_for=sub_rays)


SPARSE_SUB_RAYS = (19, 61, 127)
"""Bundles :func:`~rt_lidar.pipeline.beam_sparse.sparse_bundle` thins: full hexagonal rings, two or more,
whose thinned rim keeps the widest offsets of the dense one in the horizontal and the vertical (the
footprint and the probes stay the dense bundle's; of 37 and 91 sub-rays it would not)."""


def sparse_bundle_fits(sub_rays: int) -> bool:
    """Whether a bundle of ``sub_rays`` can be cast sparse (:data:`SPARSE_SUB_RAYS`)."""
    return sub_rays in SPARSE_SUB_RAYS


def bundle_that_runs(sub_rays: int, bundle: str) -> str:
    """The bundle ``--beam full`` casts for ``bundle`` (``sparse`` or ``dense``) of ``sub_rays``: ``dense``
    where a sparse one does not fit (:func:`sparse_bundle_fits`)."""
    return "sparse" if bundle == "sparse" and sparse_bundle_fits(sub_rays) else "dense"


def plan_of_pattern(
    pattern: SubRayPattern,
    retro_gain: np.ndarray,
    edge_m: float,
    spread_m: float,
    volume: np.ndarray | None = None,
) -> FullBeamPlan:
    """The plan of a given bundle ``pattern`` and range thresholds (what a server builds from a
    client's ``rtLidarGetBeamHits`` ``full`` request, which carries the bundle and the thresholds its
    preset gives), for a world whose materials have ``retro_gain`` and ``volume`` flags (None: none)."""
    retro = np.asarray(retro_gain) > RETRO_GAIN_MIN
    vol = np.zeros(retro.shape, bool) if volume is None else np.asarray(volume, bool)
    if vol.shape != retro.shape:
        raise ValueError(f"volume flags for {vol.size} materials, retro gains for {retro.size}")
    off = np.asarray(pattern.offsets_rad)
    foot = 2.0 * float(np.hypot(off[:, 0], off[:, 1]).max()) if len(pattern) > 1 else 0.0
    return FullBeamPlan(
        pattern=pattern,
        retro=retro,
        footprint_rad=foot,
        edge_m=float(edge_m),
        spread_m=float(spread_m),
        volume=vol,
    )


def take_firings(f: Firings, idx: np.ndarray) -> Firings:
    """The firings ``idx`` of ``f`` (their beam origins too, where the preset has them: a bundle or a
    probe starts where its central ray does)."""
    return Firings(
        _rows(f.ring, idx),
        _rows(f.t_ns, idx),
        _rows(f.azimuth_deg, idx),
        _rows(f.elevation_deg, idx),
        _rows(f.column, idx),
        None if f.unit is None else _rows(f.unit, idx),
        None if f.origin is None else _rows(f.origin, idx),
    )


def _rows(a: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``a[rows]`` for an index array ``rows``: the same elements, by ``np.take`` (a (N, 3) array's rows
    4x as fast as fancy indexing, a 1-D array's 1.4x); a boolean mask is indexed as such."""
    rows = np.asarray(rows)
    return a[rows] if rows.dtype == np.bool_ else np.take(a, rows, axis=0)


_PER_RAY = (
    "direction",
    "range_m",
    "cos_incidence",
    "material",
    "segment",
    "glass_range_m",
    "glass_cos",
    "glass_material",
    "glass_segment",
    "glass_transmission",
    "sun_cos",
    "beam_sun_cos",
    "wet",
    "mirror_range_m",
    "mirror_cos",
    "mirror_material",
    "mirror_segment",
    "glass_mirror_range_m",
    "glass_mirror_cos",
    "glass_mirror_material",
    "glass_mirror_segment",
    "glass_mirror_transmission",
    "window_transmission",
    "window_one_way",
    "spray_in_m",
    "spray_out_m",
    "spray_density",
    "source_intensity",
    "normal",
)


def take_pulses(hits: Hits, idx: np.ndarray) -> Hits:
    """The pulses ``idx`` of ``hits`` (each pulse's ``subrays`` rows of every per-ray field, the firings;
    the poses and sub-ray weights kept)."""
    n = hits.subrays
    if n == 1:
        taken: dict[str, Any] = {
            name: (None if getattr(hits, name) is None else _rows(getattr(hits, name), idx))
            for name in _PER_RAY
        }
    else:
        taken = {name: _pulse_rows(getattr(hits, name), idx, n) for name in _PER_RAY}
    return dataclasses.replace(
        hits, firings=take_firings(hits.firings, idx), bundle=None, bundle_counts=None, **taken
    )


def _pulse_rows(a: np.ndarray | None, idx: np.ndarray, n: int) -> np.ndarray | None:
    """The ``n`` rows of each pulse ``idx`` of a per-ray field ``a`` (None: None): the rows ``idx * n +
    k``, ``k < n``, in that order, gathered a pulse's block at a time (one copy of ``n`` rows, where a
    gather of the rows indexes each: 3-5x as fast, the same elements)."""
    if a is None:
        return None
    idx = np.asarray(idx)
    if idx.dtype.kind not in "iu" or idx.ndim != 1 or a.ndim == 0 or a.shape[0] % n:
        return _rows(a, (idx[:, None] * n + np.arange(n)).ravel())  # the rows one by one
    blocks = a.reshape(a.shape[0] // n, n, *a.shape[1:])
    return np.take(blocks, idx, axis=0).reshape(idx.size * n, *a.shape[1:])


_RING_RANKS = "_ring_ranks"
"""The attribute under which :func:`ring_ranks` keeps its answer on the firings it was asked about."""


def ring_ranks(f: Firings) -> np.ndarray:
    """(P,) int64 each firing's ring's rank among the frame's rings in mean elevation, lowest first
    (read-only). A ``--beam full`` frame asks three times of its firings (the bundle steps, the seam
    probes, the ring gaps): the ranks are kept on ``f`` (a frozen dataclass: its arrays are the frame's,
    never written) with the ring and elevation arrays they came from, and handed back while those are
    still the same objects."""
    kept = f.__dict__.get(_RING_RANKS)
    if kept is not None and kept[0] is f.ring and kept[1] is f.elevation_deg:
        return kept[2]
    rank = _ring_ranks(f)
    rank.setflags(write=False)
    object.__setattr__(f, _RING_RANKS, (f.ring, f.elevation_deg, rank))
    return rank


def _ring_ranks(f: Firings) -> np.ndarray:
    """:func:`ring_ranks` computed."""
    ring = f.ring.astype(np.int64)
    count = np.bincount(ring)
    present = np.flatnonzero(count)
    elevation = np.bincount(ring, weights=f.elevation_deg)[present] / count[present]
    rank_of = np.zeros(count.size, np.int64)
    rank_of[present[np.argsort(elevation, kind="stable")]] = np.arange(present.size)
    return rank_of[ring]


def ring_sorted(rank: np.ndarray, az: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, rank, azimuth, key) of pulses with ring ranks ``rank`` (:func:`ring_ranks`) and azimuths
    ``az`` (deg, in [-180, 180)) sorted by ring, then azimuth (stable): ``key`` is ``rank * 720 + az +
    360``, so the rings' keys never overlap and ring ``r + step`` at an azimuth is ``key + 720 step``."""
    key_all = rank * 720.0 + (az + 360.0)
    order = np.argsort(key_all, kind="stable")
    return order, rank[order], az[order], key_all[order]


def nearest_in_ring(
    r_s: np.ndarray, a_s: np.ndarray, key: np.ndarray, step: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each pulse of :func:`ring_sorted`'s ``(rank, azimuth, key)``, the sorted positions ``lo``,
    ``hi`` on either side of its azimuth in ring ``rank + step`` and their azimuth distances ``d_lo``,
    ``d_hi`` (inf where that position is not of that ring)."""
    n = key.size
    pos = np.searchsorted(key, key + 720.0 * step)
    lo, hi = np.clip(pos - 1, 0, n - 1), np.clip(pos, 0, n - 1)
    d_lo = np.where(r_s[lo] == r_s + step, np.abs(a_s[lo] - a_s), np.inf)
    d_hi = np.where(r_s[hi] == r_s + step, np.abs(a_s[hi] - a_s), np.inf)
    return lo, hi, d_lo, d_hi


def _neighbour_pairs(f: Firings) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) pulse pairs that neighbour in azimuth (the same ring, next in azimuth) or in ring (the ring
    next above in elevation, the nearest azimuth), each pair once; none farther apart in azimuth than
    :data:`NEIGHBOUR_MAX_DEG`."""
    n = len(f)
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order, r_s, a_s, key = ring_sorted(ring_ranks(f), f.azimuth_deg)
    along = (r_s[1:] == r_s[:-1]) & (np.abs(np.diff(a_s)) <= NEIGHBOUR_MAX_DEG)
    lo, hi, d_lo, d_hi = nearest_in_ring(r_s, a_s, key, 1)  # the ring above
    pick = np.where(d_lo <= d_hi, lo, hi)
    up = np.minimum(d_lo, d_hi) <= NEIGHBOUR_MAX_DEG
    left = np.concatenate([order[:-1][along], order[up]])
    right = np.concatenate([order[1:][along], order[pick[up]]])
    return left.astype(np.int64), right.astype(np.int64)


def bundle_pulses(
    f: Firings, central: Hits, plan: FullBeamPlan, ops: NumpySourceOps | None = None
) -> tuple[np.ndarray, dict[str, int]]:
    """(P,) bool: the pulses of firings ``f`` whose footprint may meet a depth edge, the edge of glass or
    of a retro-reflector, judged from their central rays ``central`` (one ray a pulse) and their
    neighbours' (module docstring: :func:`neighbour_marks`, run by the source's operations ``ops``, None:
    those the process would choose); and how many pulses each reason marked."""
    if ops is None:
        from rt_lidar.backend.source_ops import select_source_ops

        ops = select_source_ops()
    marks = ops.bundle_marks(f, central_rays(central, plan), plan)
    marks["volume"] = volume_marks(np, plan.volume, central.range_m, central.material)
    chosen = marks["edge"] | marks["glass"] | marks["retro"] | marks["volume"]
    return chosen, {k: int(np.count_nonzero(v)) for k, v in marks.items()}


def central_rays(
    central: Hits, plan: FullBeamPlan
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What the neighbour tests read of the ``central`` rays: range, segment, whether each passed glass,
    the glass range (inf without), whether it ended on a retro-reflector of ``plan``."""
    rng = central.range_m
    mat = central.material
    glass = central.glass_material >= 0
    glass_rng = np.where(glass, central.glass_range_m, np.float32(np.inf))
    retro = np.isfinite(rng) & (mat >= 0) & plan.retro[np.maximum(mat, 0)]
    return rng, central.segment, glass, glass_rng, retro


def neighbour_marks(
    f: Firings,
    rng: np.ndarray,
    seg: np.ndarray,
    glass: np.ndarray,
    glass_rng: np.ndarray,
    retro: np.ndarray,
    plan: FullBeamPlan,
) -> dict[str, np.ndarray]:
    """Per reason (``edge``, ``glass``, ``retro``), the (P,) bool pulses of firings ``f`` marked by the
    steps between neighbours (module docstring) in their central rays' range ``rng``, segment ``seg``,
    whether they pass ``glass`` and its range ``glass_rng`` (inf without), whether they end on a
    ``retro``-reflector."""
    return neighbour_steps(f, rng, seg, glass, glass_rng, retro, plan)[0]


def pair_separation(f: Firings, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """(K,) float32 angle (rad) between the central rays of neighbour pairs ``(i, j)`` of firings ``f``
    (small angles: the azimuth step scaled by the elevation's cosine, and the elevation step)."""
    az = np.radians(f.azimuth_deg).astype(np.float32)
    el = np.radians(f.elevation_deg).astype(np.float32)
    el_i = el[i]
    return np.hypot((az[i] - az[j]) * np.cos(el_i), el_i - el[j])


def pair_steps(
    xp: Any,
    plan: FullBeamPlan,
    sep: Any,
    i: Any,
    j: Any,
    rng: Any,
    seg: Any,
    hit: Any,
    glass: Any,
    glass_rng: Any,
    retro: Any,
) -> dict[str, Any]:
    """Per reason (``edge``, ``glass``, ``retro``), the (K,) bool steps between neighbour pairs ``(i, j)``
    ``sep`` rad apart (module docstring), on array module ``xp`` (NumPy on the host, CuPy in the device
    frame): a range step scaled to one footprint, a jump between two objects, a ray beside a miss, glass
    beginning or ending, a retro-reflector's edge."""
    foot = np.float32(plan.footprint_rad)
    scale = xp.minimum(np.float32(1.0), foot / xp.maximum(sep, np.float32(1e-9)))
    with np.errstate(invalid="ignore"):
        dr = xp.abs(rng[i] - rng[j])
        spread = dr * scale
        # two objects: the step may lie anywhere between the rays, in either footprint
        jump = xp.where(seg[i] != seg[j], dr, np.float32(0))
        glass_spread = xp.abs(glass_rng[i] - glass_rng[j]) * scale
    both = hit[i] & hit[j]
    return {
        "edge": (hit[i] != hit[j]) | (both & ((spread > plan.spread_m) | (jump > plan.edge_m))),
        "glass": (glass[i] != glass[j]) | (glass[i] & glass[j] & (glass_spread > plan.edge_m)),
        "retro": retro[i] != retro[j],
    }


def volume_marks(xp: Any, volume: Any, rng: Any, material: Any) -> Any:
    """(P,) bool: the pulses whose central ray (range ``rng``, material ``material``) ends on a material
    flagged ``volume`` (:attr:`FullBeamPlan.volume`, on ``xp``): a tree crown's leaves, where the footprint
    straddles leaves at many depths (each a step the neighbours and the probe, 2-35 mrad away, cannot see
    within it) and dense sampling's echo is as wide as they lie deep; such a pulse gets the bundle.
    Written once for any array module ``xp``: NumPy on the host (after the compiled or NumPy neighbour
    test), CuPy in the device frame."""
    if not volume.size:
        return xp.zeros(rng.shape, bool)
    on = xp.isfinite(rng) & (material >= 0)
    return on & volume[xp.clip(material, 0, volume.size - 1).astype(xp.int32)]


def neighbour_steps(
    f: Firings,
    rng: np.ndarray,
    seg: np.ndarray,
    glass: np.ndarray,
    glass_rng: np.ndarray,
    retro: np.ndarray,
    plan: FullBeamPlan,
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """:func:`neighbour_marks`, and the (i, j) int64 pairs of neighbours whose step marked them (for any
    reason), in the order of :func:`_neighbour_pairs`."""
    n = len(f)
    hit = np.isfinite(rng)
    i, j = _neighbour_pairs(f)
    marks = {"edge": np.zeros(n, bool), "glass": np.zeros(n, bool), "retro": np.zeros(n, bool)}
    if not i.size:
        return marks, i, j
    steps = pair_steps(np, plan, pair_separation(f, i, j), i, j, rng, seg, hit, glass, glass_rng, retro)
    for name, step in steps.items():
        marks[name][i[step]] = True
        marks[name][j[step]] = True
    any_step = steps["edge"] | steps["glass"] | steps["retro"]
    return marks, i[any_step], j[any_step]


def _single_ray_pattern() -> SubRayPattern:
    off = np.zeros((1, 2))
    w = np.ones(1, np.float32)
    r = np.zeros(1)
    for a in (off, w, r):
        a.setflags(write=False)
    return SubRayPattern(off, w, r)


_SINGLE_RAY = _single_ray_pattern()


def full_beam_hits(
    source: WorldSource,
    firings: Firings,
    t0_ns: int,
    t1_ns: int,
    plan: FullBeamPlan,
    sun: np.ndarray | None,
) -> Hits:
    """Every firing's central ray, and the bundle of ``plan`` (in :attr:`Hits.bundle`) for the pulses the
    neighbour test marks (:func:`neighbour_steps`) whose probe toward the marking neighbour sees the step
    (:func:`rt_lidar.pipeline.beam_probe.refine_bundles`); the batch's counts in
    :attr:`Hits.bundle_counts`."""
    from rt_lidar.pipeline.beam_cabin import beside_volume, cabin_bundles
    from rt_lidar.pipeline.beam_probe import refine_bundles
    from rt_lidar.pipeline.sources import BeamBundle

    central = source.beam_hits(firings, t0_ns, t1_ns, _SINGLE_RAY, sun)
    _, pairs_i, pairs_j = source.ops.bundle_steps(firings, central_rays(central, plan), plan)
    chosen, reasons, _ = refine_bundles(source, firings, central, (pairs_i, pairs_j), plan)
    volume = volume_marks(np, plan.volume, central.range_m, central.material)
    reasons["volume"] = int(np.count_nonzero(volume))
    beside = beside_volume(np, volume, *_neighbour_pairs(firings)) if volume.any() else volume
    reasons["beside_volume"] = int(np.count_nonzero(beside))
    chosen = chosen | volume | beside
    cabin = cabin_bundles(source, firings, central, chosen, plan)
    reasons["behind_glass"] = int(np.count_nonzero(cabin))
    idx = np.flatnonzero(chosen | cabin)
    central.bundle_counts = BundleCounts(len(firings), int(idx.size), reasons)
    if idx.size:
        pulses = take_firings(firings, idx)
        rim = _without_centre(plan.pattern)
        if rim is None:
            sub = source.beam_hits(pulses, t0_ns, t1_ns, plan.pattern, sun)
        else:  # the centre sub-ray is the central ray, cast already: the rest, and the two interleaved
            sub = _with_centre(source.beam_hits(pulses, t0_ns, t1_ns, rim, sun), central, idx, plan.pattern)
        central.bundle = BeamBundle(idx.astype(np.int64), sub)
    return central


def _without_centre(pattern: SubRayPattern) -> SubRayPattern | None:
    """``pattern`` less its first sub-ray where that is the nominal direction (offset 0: it starts and
    points as the pulse's central ray, bit for bit) and two or more remain; None otherwise."""
    off = np.asarray(pattern.offsets_rad)
    if len(pattern) < 3 or off[0, 0] != 0.0 or off[0, 1] != 0.0:
        return None
    return SubRayPattern(off[1:], pattern.weights[1:], pattern.radius[1:])


def _with_centre(rim: Hits, central: Hits, idx: np.ndarray, pattern: SubRayPattern) -> Hits:
    """The bundle ``pattern`` of pulses ``idx``: the hits of its other sub-rays ``rim`` (a pulse's
    ``len(pattern) - 1`` rows each) with the ``central`` ray of each pulse as its sub-ray 0."""
    n = len(pattern)
    b = idx.size
    fields: dict[str, Any] = {}
    for name in _PER_RAY:
        got, centre = getattr(rim, name), getattr(central, name)
        if got is None or centre is None:
            fields[name] = None
            continue
        out = np.empty((b, n, *got.shape[1:]), got.dtype)
        out[:, 0] = _rows(centre, idx)
        out[:, 1:] = got.reshape(b, n - 1, *got.shape[1:])
        fields[name] = out.reshape(b * n, *got.shape[1:])
    return dataclasses.replace(rim, subrays=n, subray_weight=pattern.weights, **fields)


class FullBeamSource(Protocol):
    """A hit source whose :attr:`~rt_lidar.pipeline.sources.Capabilities.full_beam` is set."""

    @property
    def material_names(self) -> list[str]: ...

    retro_gain: np.ndarray | None
    volume: np.ndarray | None

    def use_full_beam(self, plan: FullBeamPlan, sun: SunArg = None) -> BeamGrant: ...


def use_full_beam(
    source: FullBeamSource, preset: SensorPreset, sub_rays: int, sun: SunArg, bundle: str = "dense"
) -> BeamGrant:
    """Ask ``source`` (one whose :attr:`Capabilities.full_beam` is set) for ``--beam full`` with a bundle of
    ``sub_rays`` (cast ``bundle``: :func:`full_beam_plan`); the plan takes the source's materials' retro
    gains and volume flags (the default material table's where the source names none, each apart)."""
    retro, volume = source.retro_gain, source.volume
    if retro is None or volume is None:
        from rt_lidar.sensor.materials import load_material_table

        arrays = load_material_table().arrays(source.material_names, preset.optics.wavelength_nm)
        retro = arrays.retro_gain if retro is None else retro
        volume = arrays.volume if volume is None else volume
    plan = full_beam_plan(preset, np.asarray(retro), sub_rays, bundle=bundle, volume=volume)
    return source.use_full_beam(plan, sun)


def beam_summary(pipeline: Pipeline) -> dict[str, Any]:
    """summary.json's ``beam`` section of ``pipeline``'s run: the mode that ran (``fixed``: every pulse as
    its ``sub_rays``; ``full``: the bundle where needed), and for ``full`` how many pulses of the frames it
    handed on (:attr:`~rt_lidar.pipeline.frame_loop.Pipeline.bundle_stats`) got the bundle, their share
    and why."""
    sub_rays, return_mode = pipeline.physics.sub_rays, pipeline.physics.return_mode
    plan = getattr(pipeline.source, "full_beam", None)
    if not isinstance(plan, FullBeamPlan):
        return {"mode": "fixed", "sub_rays": sub_rays, "return_mode": return_mode}
    return {
        "mode": "full",
        "sub_rays": plan.stands_for or len(plan.pattern),
        "bundle": plan.bundle,
        "cast_sub_rays": len(plan.pattern),
        "return_mode": return_mode,
        "edge_m": plan.edge_m,
        **pipeline.bundle_stats.as_dict(),
    }
