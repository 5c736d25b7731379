"""Intensity masks: lidar points projected into a camera image, densified, with the dropped rays marked.

A mask holds, per image pixel, the intensity in [0, 1] of the nearest lidar return (z-buffer), a
label (:data:`LABEL_RETURN`, :data:`LABEL_DROP`, or :data:`LABEL_NONE` where no ray looked) and the
depth. Dropped rays are the empty cells of the organised range image (rows = rings, columns = azimuth
bins) whose ray, placed at the range interpolated from its ring neighbours, lands inside the image.
Densification fills each empty pixel from its nearest-depth neighbour, ``radius`` pixels at most, the
way RINet's mask reports "the closest return" for every pixel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rt_lidar.unreal_bridge.world.camera import project

__all__ = [
    "LABEL_DROP",
    "LABEL_NONE",
    "LABEL_RETURN",
    "IntensityMask",
    "build_mask",
    "densify",
    "dropped_rays",
    "estimate_columns",
    "organise",
    "project",
    "recover_rings",
    "zbuffer",
]

LABEL_NONE, LABEL_RETURN, LABEL_DROP = 0, 1, 2


@dataclass
class IntensityMask:
    """A dense intensity mask of one image and what it was built from."""

    intensity: np.ndarray
    """(H, W) float32 in [0, 1]; 0 where the ray dropped or no ray looked."""
    label: np.ndarray
    """(H, W) uint8: LABEL_NONE, LABEL_RETURN or LABEL_DROP."""
    depth: np.ndarray
    """(H, W) float32 camera depth of the pixel's return or dropped ray (inf: none)."""
    points_in_image: int = 0
    """Lidar points that project inside the image with positive depth."""
    drop_rays: int = 0
    """Empty range-image cells whose ray lands inside the image."""

    @property
    def drop_pixels(self) -> int:
        """Pixels labelled as dropped (after densification)."""
        return int(np.count_nonzero(self.label == LABEL_DROP))

    @property
    def return_pixels(self) -> int:
        """Pixels labelled as returns (after densification)."""
        return int(np.count_nonzero(self.label == LABEL_RETURN))

    def save(self, path: str | Path) -> Path:
        """Write as a compressed ``.npz``; returns the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            p,
            intensity=self.intensity.astype(np.float32),
            label=self.label.astype(np.uint8),
            depth=self.depth.astype(np.float32),
            stats=np.array([self.points_in_image, self.drop_rays], np.int64),
        )
        return p

    @classmethod
    def load(cls, path: str | Path) -> IntensityMask:
        """Read a mask written by :meth:`save`."""
        with np.load(path) as z:
            stats = z["stats"]
            return cls(z["intensity"], z["label"], z["depth"], int(stats[0]), int(stats[1]))


def zbuffer(
    u: np.ndarray, v: np.ndarray, depth: np.ndarray, height: int, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """The nearest point per pixel: (H, W) depth (inf where none) and (H, W) index into the inputs
    (-1 where none). ``u``, ``v`` integer pixel coordinates inside the image."""
    flat = v.astype(np.int64) * width + u.astype(np.int64)
    order = np.lexsort((depth, flat))  # by pixel, then nearest first
    first = np.ones(order.size, bool)
    first[1:] = flat[order][1:] != flat[order][:-1]
    winners = order[first]
    zdepth = np.full(height * width, np.inf, np.float32)
    index = np.full(height * width, -1, np.int64)
    zdepth[flat[winners]] = depth[winners]
    index[flat[winners]] = winners
    return zdepth.reshape(height, width), index.reshape(height, width)


def densify(
    depth: np.ndarray, value: np.ndarray, label: np.ndarray, radius: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fill empty pixels (depth inf) from their nearest-depth 8-neighbour, ``radius`` rounds."""
    d, val, lab = depth.copy(), value.copy(), label.copy()
    h, w = d.shape
    offsets = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx]
    for _ in range(max(0, radius)):
        empty = ~np.isfinite(d)
        if not empty.any():
            break
        pd = np.pad(d, 1, constant_values=np.inf)
        pv = np.pad(val, 1)
        pl = np.pad(lab, 1)
        best_d = np.full_like(d, np.inf)
        best_v = np.zeros_like(val)
        best_l = np.zeros_like(lab)
        for dy, dx in offsets:
            nd = pd[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]
            better = nd < best_d
            best_d = np.where(better, nd, best_d)
            best_v = np.where(better, pv[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w], best_v)
            best_l = np.where(better, pl[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w], best_l)
        fill = empty & np.isfinite(best_d)
        d[fill], val[fill], lab[fill] = best_d[fill], best_v[fill], best_l[fill]
    return d, val, lab


def recover_rings(xyz: np.ndarray) -> np.ndarray:
    """Ring (scan line) of each point of a KITTI-ordered cloud, 0 = first line in file order.

    KITTI stores each laser's rotation in turn, so a new line starts where the azimuth crosses 0 from
    below. Where that fails (a shuffled cloud), rings are 0.4 deg elevation bins from the top."""
    x, y, z = xyz[:, 0], xyz[:, 1], xyz[:, 2]
    az = np.arctan2(y, x)
    elev = np.degrees(np.arctan2(z, np.hypot(x, y)))
    if az.size > 1:
        starts = (az[:-1] < 0) & (az[1:] >= 0)
        ring = np.concatenate([[0], np.cumsum(starts)]).astype(np.int64)
        n = int(ring[-1]) + 1
        if n <= 256:
            counts = np.bincount(ring, minlength=n)
            sums = np.bincount(ring, elev, minlength=n)
            sq = np.bincount(ring, elev * elev, minlength=n)
            mean = sums / np.maximum(counts, 1)
            spread = np.sqrt(np.maximum(sq / np.maximum(counts, 1) - mean**2, 0.0))
            if float(np.median(spread)) < 0.3:
                return ring
    top = float(elev.max()) if elev.size else 0.0
    return np.floor((top - elev) / 0.4 + 1e-9).astype(np.int64)


def estimate_columns(ring: np.ndarray, azimuth: np.ndarray) -> int:
    """Azimuth bins of a full turn: 360 deg over the median angular step between neighbours of a ring."""
    order = np.lexsort((azimuth, ring))
    a, r = azimuth[order], ring[order]
    step = np.diff(a)[(r[1:] == r[:-1])]
    step = step[step > 1e-6]
    if step.size == 0:
        return 2048
    return int(np.clip(round(2 * np.pi / float(np.median(step))), 16, 1 << 15))


def organise(ring: np.ndarray, azimuth: np.ndarray, rng: np.ndarray, n_rows: int, n_cols: int) -> np.ndarray:
    """(n_rows, n_cols) range image (nan = empty cell); azimuth in radians; nearest return per cell."""
    col = np.floor((azimuth + np.pi) / (2 * np.pi) * n_cols).astype(np.int64) % n_cols
    img = np.full(n_rows * n_cols, np.inf, np.float32)
    ok = (ring >= 0) & (ring < n_rows)
    np.minimum.at(img, ring[ok] * n_cols + col[ok], rng[ok].astype(np.float32))
    img[~np.isfinite(img)] = np.nan
    return img.reshape(n_rows, n_cols)


def dropped_rays(
    range_image: np.ndarray, row_elevation: np.ndarray, default_range: float = 30.0
) -> np.ndarray:
    """Sensor-frame points (M, 3) of the empty cells, each at the range interpolated along its row from
    the nearest returns (``default_range`` in a row without any); elevations (n_rows,) in radians."""
    n_rows, n_cols = range_image.shape
    cols = np.arange(n_cols)
    out = []
    for r in range(n_rows):
        row = range_image[r]
        empty = np.isnan(row)
        if not empty.any() or not np.isfinite(row_elevation[r]):
            continue
        valid = ~empty
        rr = np.interp(cols[empty], cols[valid], row[valid]) if valid.any() else np.full(empty.sum(), 0.0)
        rr = np.where(rr > 0, rr, default_range) if valid.any() else np.full(empty.sum(), default_range)
        az = (cols[empty] + 0.5) / n_cols * 2 * np.pi - np.pi
        el = row_elevation[r]
        out.append(np.stack([rr * np.cos(el) * np.cos(az), rr * np.cos(el) * np.sin(az), rr * np.sin(el)], 1))
    return np.concatenate(out) if out else np.zeros((0, 3))


def build_mask(
    xyz: np.ndarray,
    intensity: np.ndarray,
    projection: np.ndarray,
    width: int,
    height: int,
    *,
    ring: np.ndarray | None = None,
    row_elevation: np.ndarray | None = None,
    n_cols: int | None = None,
    radius: int = 3,
    default_range: float = 30.0,
    no_ray: np.ndarray | None = None,
) -> IntensityMask:
    """The intensity mask of one frame.

    ``xyz`` (N, 3) lidar points, ``intensity`` (N,) in [0, 1], ``projection`` (3, 4) lidar -> pixels.
    ``ring`` per point (recovered from the KITTI point order when None); ``row_elevation`` (n_rows,)
    radians per ring (the rings' median elevation when None); ``n_cols`` azimuth bins (estimated when
    None). ``no_ray`` (H, W) bool marks pixels no lidar ray can return from (sky in a rendered image):
    dropped rays landing there are not labelled.
    """
    xyz = np.asarray(xyz, dtype=np.float64).reshape(-1, 3)
    inten = np.clip(np.asarray(intensity, dtype=np.float32).reshape(-1), 0.0, 1.0)
    u, v, depth, inside = project(xyz, projection, width, height)
    n_in = int(np.count_nonzero(inside))
    rings = recover_rings(xyz) if ring is None else np.asarray(ring, dtype=np.int64)
    rng = np.linalg.norm(xyz, axis=1)
    az = np.arctan2(xyz[:, 1], xyz[:, 0])
    n_rows = int(rings.max()) + 1 if rings.size else 0
    if row_elevation is None:
        elev = np.arctan2(xyz[:, 2], np.hypot(xyz[:, 0], xyz[:, 1]))
        row_elevation = np.full(n_rows, np.nan)
        for r in np.unique(rings):
            row_elevation[r] = np.median(elev[rings == r])
    else:
        n_rows = max(n_rows, len(row_elevation))
    cols = n_cols or (estimate_columns(rings, az) if rings.size else 2048)
    drops = dropped_rays(organise(rings, az, rng, n_rows, cols), np.asarray(row_elevation), default_range)
    du, dv, ddepth, dinside = project(drops, projection, width, height)
    if no_ray is not None and dinside.any():
        dinside[dinside] = ~no_ray[dv[dinside].astype(np.int64), du[dinside].astype(np.int64)]

    # returns and drops compete in one z-buffer: the nearest decides the pixel
    all_u = np.concatenate([u[inside], du[dinside]])
    all_v = np.concatenate([v[inside], dv[dinside]])
    all_d = np.concatenate([depth[inside], ddepth[dinside]])
    all_val = np.concatenate([inten[inside], np.zeros(int(dinside.sum()), np.float32)])
    all_lab = np.concatenate(
        [np.full(n_in, LABEL_RETURN, np.uint8), np.full(int(dinside.sum()), LABEL_DROP, np.uint8)]
    )
    zd, idx = zbuffer(all_u, all_v, all_d, height, width)
    hit = idx >= 0
    val = np.where(hit, all_val[np.maximum(idx, 0)], 0).astype(np.float32)
    lab = np.where(hit, all_lab[np.maximum(idx, 0)], LABEL_NONE).astype(np.uint8)
    zd, val, lab = densify(zd, val, lab, radius)
    if no_ray is not None:
        lab = np.where(no_ray & (lab == LABEL_DROP), LABEL_NONE, lab).astype(np.uint8)
    val = np.where(lab == LABEL_RETURN, val, 0).astype(np.float32)
    return IntensityMask(val, lab, zd, n_in, int(dinside.sum()))
