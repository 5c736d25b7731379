"""Organised scans for the realism statistics: every ray of a scan as a cell (ring, column), with or
without a return, from a simulated scan's points, a KITTI ``.bin`` or an Ouster pcap.

The statistics of :mod:`rt_lidar.validation.realism` need to know which rays returned nothing (raydrop,
the ground horizon), so a cloud of points is put back on its firing grid: rings from the point's
``ring`` field (a KITTI file has none: its points run ring after ring, each ring's azimuth sweeping the
camera's field of view, so a ring starts where the azimuth jumps back), columns from the azimuth at
the ring's own firing phase. An Ouster frame is already a grid (1024 columns of 64 pixels).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.sinks.pcap import read_pcap_udp

__all__ = [
    "ScanGrid",
    "camera_view",
    "grid_from_points",
    "kitti_file_intensity",
    "kitti_laser_rings",
    "parse_kitti_calib",
    "read_kitti_bin",
    "read_kitti_calib",
    "read_ouster_legacy_pcap",
]


@dataclass
class ScanGrid:
    """One scan as a (rings, columns) grid of rays; ``range_m`` 0 where a ray returned nothing."""

    name: str
    xyz: np.ndarray
    """(rings, columns, 3) float64 sensor-frame point of each return (NaN where none)."""
    range_m: np.ndarray
    """(rings, columns) range of each return, 0 where none."""
    intensity: np.ndarray
    """(rings, columns) reported intensity (rounded to ``step``), 0 where none."""
    direction: np.ndarray
    """(rings, columns, 3) unit direction of each ray, returned or not."""
    in_view: np.ndarray
    """(rings, columns) bool: the ray belongs to the scan (a cropped scan leaves the rest out)."""
    step: float
    """The sensor's reporting step of intensity (Velodyne: 1; KITTI: 0.01; Ouster signal: 1)."""
    units: str
    azimuth_deg: np.ndarray | None = None
    """(rings, columns) azimuth of each ray where the rings' columns do not line up (None: they do)."""
    note: str = ""
    """How the file was read where it could have been read otherwise (which frame of several, dual
    returns reduced, rings from elevation), for the report."""

    @property
    def returned(self) -> np.ndarray:
        """(rings, columns) bool: the ray has a return."""
        return self.range_m > 0


def _circular_phase(az_deg: np.ndarray, step: float) -> float:
    """The ring's firing phase: the circular mean of the azimuths modulo ``step``."""
    ang = 2 * np.pi * np.mod(az_deg, step) / step
    return float(np.angle(np.exp(1j * ang).mean()) / (2 * np.pi) * step)


SETTLE_CELLS = 2
"""How far (cells) a ray sharing its cell with another may move, with the rays between, to an empty one."""
SAME_RAY_STEPS = 0.25
"""Points of one ring closer than this in azimuth (steps) are one ray's returns (a dual-return cloud's two,
within 0.01 deg of each other): they share a cell, the first (strongest) kept, and none moves."""


def _settle_shared_cells(col: np.ndarray, lean: np.ndarray, columns: int) -> np.ndarray:
    """Cells of one ring's points (``col``; ``lean``, each one's offset from its cell's centre in steps)
    where two of them round to one cell: the one leaning most toward the side of an empty cell within
    :data:`SETTLE_CELLS` moves one cell that way, and each single ray between it and the empty cell one
    further, so the ring's rays keep their order. Where a ring's firing phase drifts across whole cells
    and jitters (Argoverse 2's sweep: steps of 0.18-0.22 deg on 0.2), a ray crossing into its neighbour's
    cell otherwise shares it and leaves a false hole beside them (1,309 of that sweep's 51,785 points
    shared a cell; 340 still do, where the drift shifts whole runs; docs/realism.md, change 58). A
    regular sweep has none; a shared cell with no empty one within reach stays (its extra ray dropped),
    as do a ray's two returns (:data:`SAME_RAY_STEPS`)."""
    col = col.copy()
    taken = np.bincount(col, minlength=columns)
    for c in np.flatnonzero(taken >= 2):
        for side in (-1, 1):
            if taken[c] < 2:
                break
            path = [(c + side * d) % columns for d in range(1, SETTLE_CELLS + 1)]
            empty = next((j for j, cell in enumerate(path) if taken[cell] != 1), None)
            if empty is None or taken[path[empty]] != 0:
                continue
            here = np.flatnonzero(col == c)
            mover = here[np.argmin(lean[here] * -side)]  # the one leaning furthest to this side
            others = here[here != mover]
            if lean[mover] * side <= 0 or np.min(np.abs(lean[others] - lean[mover])) < SAME_RAY_STEPS:
                continue  # a second return of one ray (dual returns) keeps its cell: the stronger wins
            for j in range(empty, 0, -1):  # the single rays between move on by one, farthest first
                col[np.flatnonzero(col == path[j - 1])] = path[j]
            col[mover] = path[0]
            taken[path[empty]], taken[c] = 1, taken[c] - 1
    return col


def grid_from_points(
    name: str,
    xyz: np.ndarray,
    intensity: np.ndarray,
    ring: np.ndarray,
    step: float,
    units: str,
    columns: int | None = None,
) -> ScanGrid:
    """The firing grid of a rotating sensor's points (one return a ray): ``columns`` per revolution (by
    default 360 over the median azimuth step between neighbours of a ring), each ring binned at its own
    phase; the directions of rays without a return come from the ring's median elevation."""
    xyz = np.asarray(xyz, np.float64)
    az = np.degrees(np.arctan2(xyz[:, 1], xyz[:, 0]))
    rng = np.linalg.norm(xyz, axis=1)
    el = np.degrees(np.arcsin(np.clip(xyz[:, 2] / np.maximum(rng, 1e-9), -1, 1)))
    rings = np.unique(ring)
    if columns is None:
        diffs = []
        for r in rings:
            a = np.sort(az[ring == r])
            d = np.diff(a)
            diffs.append(d[(d > 1e-4) & (d < 2.0)])
        d = np.concatenate(diffs) if diffs else np.array([])
        if d.size == 0:
            raise ConfigError(f"{name}: too few points to find the scan's azimuth step")
        columns = round(360.0 / float(np.median(d)))
    step_deg = 360.0 / columns
    n = len(rings)
    out_xyz = np.full((n, columns, 3), np.nan)
    out_r = np.zeros((n, columns))
    out_i = np.zeros((n, columns))
    direction = np.zeros((n, columns, 3))
    qi = np.round(np.asarray(intensity, np.float64) / step) * step
    for k, r in enumerate(rings):
        sel = np.flatnonzero(ring == r)
        phase = _circular_phase(az[sel], step_deg)
        pos = (az[sel] - phase) / step_deg
        col = _settle_shared_cells(
            np.mod(np.round(pos).astype(np.int64), columns), pos - np.round(pos), columns
        )
        col_rev = col[::-1]  # the first point of a cell wins: assign in reverse
        s_rev = sel[::-1]
        out_xyz[k, col_rev] = xyz[s_rev]
        out_r[k, col_rev] = rng[s_rev]
        out_i[k, col_rev] = qi[s_rev]
        elev = np.radians(float(np.median(el[sel])))
        caz = np.radians(phase + step_deg * np.arange(columns))
        direction[k] = np.stack(
            [np.cos(elev) * np.cos(caz), np.cos(elev) * np.sin(caz), np.full(columns, np.sin(elev))], -1
        )
    return ScanGrid(name, out_xyz, out_r, out_i, direction, np.ones((n, columns), bool), step, units)


def read_kitti_calib(path: str | Path) -> dict[str, np.ndarray]:
    """The matrices of a KITTI object-layout ``calib.txt`` (name -> flat float array)."""
    return parse_kitti_calib(Path(path).read_text())


def parse_kitti_calib(text: str) -> dict[str, np.ndarray]:
    """The matrices of a KITTI object-layout calibration's ``text`` (name -> flat float array)."""
    out = {}
    for line in text.splitlines():
        if ":" in line:
            key, vals = line.split(":", 1)
            out[key.strip()] = np.array([float(v) for v in vals.split()])
    return out


def _in_image(points: np.ndarray, calib: dict[str, np.ndarray], size: tuple[int, int]) -> np.ndarray:
    """Which ``points`` (..., 3, velodyne frame) project into KITTI camera 2's image (``size`` = width,
    height) in front of it (``P2 @ R0_rect @ Tr_velo_to_cam``)."""
    p2 = calib["P2"].reshape(3, 4)
    r0 = np.eye(4)
    r0[:3, :3] = calib["R0_rect"].reshape(3, 3)
    tr = np.eye(4)
    tr[:3, :] = calib["Tr_velo_to_cam"].reshape(3, 4)
    pts = np.nan_to_num(points.reshape(-1, 3))
    h = np.concatenate([pts, np.ones((len(pts), 1))], 1) @ (p2 @ r0 @ tr).T
    with np.errstate(divide="ignore", invalid="ignore"):
        u, v = h[:, 0] / h[:, 2], h[:, 1] / h[:, 2]
    inside = (h[:, 2] > 0) & (u >= 0) & (u < size[0]) & (v >= 0) & (v < size[1])
    return inside.reshape(points.shape[:-1])


def camera_view(direction: np.ndarray, calib: dict[str, np.ndarray], size: tuple[int, int]) -> np.ndarray:
    """Which rays ``direction`` (..., 3) land in the image of KITTI camera 2 (``size`` = width, height)
    at 20 m (``P2 @ R0_rect @ Tr_velo_to_cam``)."""
    return _in_image(direction * 20.0, calib, size)


def _sequence_grid(
    name: str,
    xyz: np.ndarray,
    intensity: np.ndarray,
    ring: np.ndarray,
    step: float,
    units: str,
    pad_deg: float,
) -> ScanGrid:
    """The firing grid of points stored ring after ring in firing order, whose azimuth step is not
    regular (KITTI's HDL-64E: half steps now and then): each ring's rays are counted along its sweep, a
    gap of g steps holding g - 1 rays without a return, ``pad_deg`` of rays added at both ends."""
    xyz = np.asarray(xyz, np.float64)
    az = np.degrees(np.arctan2(xyz[:, 1], xyz[:, 0]))
    rng = np.linalg.norm(xyz, axis=1)
    el = np.degrees(np.arcsin(np.clip(xyz[:, 2] / np.maximum(rng, 1e-9), -1, 1)))
    rings = np.unique(ring)
    d_all = np.concatenate([np.diff(az[ring == r]) for r in rings])
    az_step = float(np.median(d_all[(d_all > 1e-4) & (d_all < 2.0)]))
    pad = round(pad_deg / az_step)
    cells, azs = [], []
    for r in rings:
        sel = np.flatnonzero(ring == r)
        sel = sel[np.argsort(az[sel], kind="stable")]  # a laser stored from its seam: run it by azimuth
        inc = np.maximum(1, np.round(np.diff(az[sel]) / az_step).astype(np.int64))
        idx = pad + np.concatenate([[0], np.cumsum(inc)])
        n = int(idx[-1]) + 1 + pad
        cell_az = np.interp(np.arange(n), idx, az[sel], left=np.nan, right=np.nan)
        head, tail = np.arange(pad), np.arange(int(idx[-1]) + 1, n)
        cell_az[head] = az[sel[0]] - az_step * (pad - head)
        cell_az[tail] = az[sel[-1]] + az_step * (tail - idx[-1])
        cells.append((sel, idx, float(np.median(el[sel]))))
        azs.append(cell_az)
    width = max(len(a) for a in azs)
    n = len(rings)
    out_xyz = np.full((n, width, 3), np.nan)
    out_r = np.zeros((n, width))
    out_i = np.zeros((n, width))
    out_az = np.full((n, width), np.nan)
    direction = np.zeros((n, width, 3))
    in_view = np.zeros((n, width), bool)
    qi = np.round(np.asarray(intensity, np.float64) / step) * step
    for k, ((sel, idx, elev), cell_az) in enumerate(zip(cells, azs, strict=True)):
        m = len(cell_az)
        out_xyz[k, idx], out_r[k, idx], out_i[k, idx] = xyz[sel], rng[sel], qi[sel]
        out_az[k, :m] = cell_az
        in_view[k, :m] = True
        e, a = np.radians(elev), np.radians(cell_az)
        direction[k, :m] = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.full(m, np.sin(e))], -1)
    return ScanGrid(name, out_xyz, out_r, out_i, direction, in_view, step, units, out_az)


JITTER_BACK_DEG = 1.0
"""A step back in azimuth smaller than this inside a KITTI sweep is not a new laser: full 360-deg frames
(OpenPCDet's sample testing/000004) hold steps of 0.01 deg back within one laser, at object edges;
a new laser's sweep jumps back by tens of degrees (80 in a camera crop, 360 over a full turn)."""


def kitti_laser_rings(xyz: np.ndarray) -> np.ndarray:
    """Each point's laser (ring index) in a KITTI ``.bin``, whose points run laser after laser.

    A laser's sweep is stored from its seam: in KITTI's files each laser starts straight ahead
    (azimuth 0), runs to +180 deg, jumps back to -180 and ends just short of 0 (frame 000008's crop:
    [0, 40] then [-40, 0) per laser). Splitting where the azimuth jumps back would join one laser's
    right half to the next one's left half. The sweep is cut into pieces where the azimuth jumps back
    or crosses 0 upwards; a new laser begins at whichever of the two joins points of different lasers:
    the one whose two sides differ more in elevation where they meet (one laser spacing, ~0.4 deg,
    against ~0 across a laser's own seam). Jumps back that do not cross 0 always start a laser, but a
    step back under :data:`JITTER_BACK_DEG` is a laser's own jitter (full turns hold a few a frame)."""
    xyz = np.asarray(xyz, np.float64)
    az = np.degrees(np.arctan2(xyz[:, 1], xyz[:, 0]))
    if az.size < 2:
        return np.zeros(az.size, np.int64)
    el = np.degrees(np.arctan2(xyz[:, 2], np.hypot(xyz[:, 0], xyz[:, 1])))
    prev, cur = az[:-1], az[1:]
    back = cur < prev - JITTER_BACK_DEG
    wrap = back & (prev >= 0) & (cur < 0)  # +180 -> -180 (or the crop's +40 -> -40)
    up = ~back & (prev < 0) & (cur >= 0)  # crossing straight ahead
    # where a wrap or an up-crossing joins two pieces, the elevation step across the join
    after_up = np.flatnonzero(up)
    step_up = np.abs(el[after_up + 1] - el[after_up])
    # a wrap joins the piece before it (its start) to the piece after it (its end) across the seam at 0
    starts = np.flatnonzero(np.concatenate([[True], back | up]))
    ends = np.concatenate([starts[1:] - 1, [az.size - 1]])
    piece = np.cumsum(np.concatenate([[False], back | up]))
    wraps = np.flatnonzero(wrap)
    step_wrap = np.abs(el[starts[piece[wraps]]] - el[ends[piece[wraps + 1]]])
    seam_at_zero = step_up.size > 0 and (step_wrap.size == 0 or np.median(step_wrap) < np.median(step_up))
    new_laser = (back & ~wrap) | (up if seam_at_zero else wrap)
    return np.concatenate([[0], np.cumsum(new_laser)])


KITTI_STEP = 0.01
"""The step of a KITTI ``.bin``'s reflectance: every value of the vendored frame 000008 lies within 3e-6
of a multiple of 0.01 (0 to 0.99), only 23 % on multiples of 1/255."""
KITTI_UNITS = "KITTI reflectance 0..0.99"


def kitti_file_intensity(byte: np.ndarray) -> np.ndarray:
    """The HDL-64E S2's 8-bit intensity as KITTI's ``.bin`` holds it: ``floor(byte * 100 / 256) / 100``
    (float64). KITTI does not document the mapping; of byte / 255 and byte / 256, rounded or floored to
    0.01, this one alone puts the 8-bit maximum at 0.99, where frame 000008's saturated returns sit (0.7 %
    of them, none at 0.96-0.98 and none at 1.00)."""
    b = np.clip(np.asarray(byte, np.float64), 0.0, 255.0)
    return np.floor(b * 100.0 / 256.0 + 1e-9) * KITTI_STEP


def read_kitti_bin(path: str | Path, calib_path: str | Path | None = None) -> ScanGrid:
    """A KITTI velodyne ``.bin`` (float32 x, y, z, reflectance) on its firing grid; with ``calib_path``
    the rays outside camera 2's 1242x375 image are out of view (KITTI's ``velodyne_reduced`` frames keep
    only those): a full turn and its camera crop read the same view."""
    a = np.fromfile(path, np.float32).reshape(-1, 4)
    ring = kitti_laser_rings(a[:, :3])
    grid = _sequence_grid(Path(path).name, a[:, :3], a[:, 3], ring, KITTI_STEP, KITTI_UNITS, 45.0)
    if calib_path is not None:  # a return is in view where its point is in the image (KITTI's own crop:
        # a camera-cropped file holds only those), a ray without one where its direction is at 20 m
        calib = read_kitti_calib(calib_path)
        size = (1242, 375)
        grid.in_view &= np.where(
            grid.returned, _in_image(grid.xyz, calib, size), camera_view(grid.direction, calib, size)
        )
    return grid


_LEGACY_PX = np.dtype(
    {"names": ["range", "signal"], "formats": ["<u4", "<u2"], "offsets": [0, 6], "itemsize": 12}
)


def read_ouster_legacy_pcap(pcap: str | Path, metadata: str | Path) -> ScanGrid:
    """The most complete frame of an Ouster LEGACY-profile pcap (firmware 1.x-2.x) with its metadata
    JSON (beam angles, ``lidar_mode``): range (20 bits, mm) and ``signal`` (photon counts) per pixel."""
    meta = json.loads(Path(metadata).read_text())
    alt = np.asarray(meta.get("beam_altitude_angles") or meta["beam_intrinsics"]["beam_altitude_angles"])
    azi = np.asarray(meta.get("beam_azimuth_angles") or meta["beam_intrinsics"]["beam_azimuth_angles"])
    mode = meta.get("lidar_mode") or meta["config_params"]["lidar_mode"]
    width = int(str(mode).split("x")[0])
    rows = len(alt)
    col = np.dtype(
        {
            "names": ["ts", "mid", "fid", "enc", "px", "status"],
            "formats": ["<u8", "<u2", "<u2", "<u4", (_LEGACY_PX, (rows,)), "<u4"],
            "offsets": [0, 8, 10, 12, 16, 16 + 12 * rows],
        }
    )
    size = 16 * col.itemsize
    frames: dict[int, dict[int, np.ndarray]] = {}
    for rec in read_pcap_udp(pcap):
        if len(rec.payload) != size:
            continue  # IMU packets and other profiles
        cols = np.frombuffer(rec.payload, col)
        for c in cols:
            if c["status"] == 0xFFFFFFFF and c["mid"] < width:
                frames.setdefault(int(c["fid"]), {})[int(c["mid"])] = c["px"]
    if not frames:
        raise ConfigError(f"{pcap}: no LEGACY lidar packets of {size} bytes ({rows} beams)")
    fid = max(frames, key=lambda f: len(frames[f]))
    got = frames[fid]
    rng = np.zeros((rows, width))
    sig = np.zeros((rows, width))
    in_view = np.zeros((rows, width), bool)
    for m, px in got.items():
        rng[:, m] = (px["range"] & 0xFFFFF) / 1000.0
        sig[:, m] = px["signal"]
        in_view[:, m] = True
    theta = 2 * np.pi * (1 - np.arange(width) / width)[None, :] - np.radians(azi)[:, None]
    phi = np.radians(alt)[:, None]
    direction = np.stack(
        [np.cos(phi) * np.cos(theta), np.cos(phi) * np.sin(theta), np.broadcast_to(np.sin(phi), theta.shape)],
        -1,
    )
    xyz = np.where((rng > 0)[..., None], direction * rng[..., None], np.nan)
    sig = np.where(rng > 0, sig, 0.0)
    return ScanGrid(Path(pcap).name, xyz, rng, sig, direction, in_view, 1.0, "Ouster signal (photons)")
