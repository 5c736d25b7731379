"""Real scans from files, for the realism statistics: the format told from the file itself, every reader
putting the scan on its firing grid (rings, columns, rays without returns) as
:mod:`rt_lidar.validation.realism_grid` does.

- ``.pcap`` or ``.pcapng`` of 1206-byte UDP payloads: Velodyne data packets
  (:mod:`rt_lidar.validation.real_velodyne`);
  other payloads: Ouster lidar packets of any profile (:mod:`rt_lidar.validation.real_ouster`), with
  the sensor's metadata JSON beside the pcap (the same stem, or the only ``.json`` in its folder);
- ``.pcd.bin``: a nuScenes sweep (float32 x, y, z, intensity 0-255, ring; the HDL-32E's rays without a
  return come as points within 0.5 m of the sensor, the offsets of its calibration applied to distance 0);
- ``.bin``: KITTI's layout (float32 x, y, z, reflectance); with the HDL-64E's preset the rings come from
  the sweep's jumps back (and ``calib.txt`` beside it crops to camera 2's view), otherwise from the
  nearest beam elevation of the preset;
- ``.pcd`` (binary or ascii): x, y, z, ``intensity``, and ``ring`` where it has one (else, as above, the
  nearest elevation of the preset's beams);
- a ROS 1 ``.bag`` or a ROS 2 bag (its folder, ``.mcap`` or ``.db3``) of ``sensor_msgs/PointCloud2``
  (:mod:`rt_lidar.validation.real_bags`): one cloud read as a PCD's points are;
- ``.csv`` (VeloView, ouster-cli), ``.las``/``.laz`` and ``.ply`` exports
  (:mod:`rt_lidar.validation.real_tables`): their points read as a PCD's are.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from rt_lidar.errors import RecordingError
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sinks.pcap_read import PCAP_MAGICS, PCAPNG_MAGIC, read_pcap_udp
from rt_lidar.sinks.pcd import read_pcd_table
from rt_lidar.validation.real_ouster import read_ouster_pcap
from rt_lidar.validation.real_velodyne import read_velodyne_pcap
from rt_lidar.validation.realism_grid import ScanGrid, grid_from_points, read_kitti_bin

__all__ = [
    "FORMATS",
    "detect_format",
    "is_ouster_metadata",
    "ouster_metadata_beside",
    "read_nuscenes_bin",
    "read_pcd_scan",
    "read_real_scan",
    "read_xyzi_bin",
    "rings_from_elevation",
    "scan_from_table",
]

FORMATS = {
    "velodyne-pcap": "Velodyne data packets in a pcap or pcapng (VLP-16, VLP-32C, HDL-32E, VLS-128; HDL-64E "
    "by preset)",
    "ouster-pcap": "Ouster lidar packets (any profile) in a pcap or pcapng, the sensor's metadata .json "
    "beside it",
    "nuscenes-bin": "nuScenes .pcd.bin (float32 x y z intensity ring)",
    "kitti-bin": "KITTI .bin (float32 x y z reflectance), calib.txt beside it crops to camera 2",
    "pcd": "PCD (binary or ascii) with x y z intensity [ring]",
    "rosbag": "ROS 1 .bag or ROS 2 bag (folder, .mcap, .db3) of sensor_msgs/PointCloud2 with x y z "
    "intensity [ring]",
    "csv": "CSV export: VeloView/LidarView's Save As CSV, ouster-cli's save .csv, or x y z intensity [ring]",
    "las": "LAS or LAZ (x y z intensity [ring as an extra dimension]; LAZ needs laspy's lazrs backend)",
    "ply": "PLY (ascii or binary) whose vertices have x y z intensity [ring]",
}
"""The formats :func:`read_real_scan` tells apart, with what each holds."""
NO_RETURN_M = 0.5
"""Points closer than this to the sensor are rays without a return (nuScenes, organised PCDs)."""


def rings_from_elevation(xyz: np.ndarray, preset: SensorPreset) -> np.ndarray:
    """(N,) ring of each point: the preset's beam whose elevation is nearest the point's."""
    r = np.linalg.norm(xyz, axis=1)
    el = np.degrees(np.arcsin(np.clip(xyz[:, 2] / np.maximum(r, 1e-9), -1.0, 1.0)))
    elev = np.asarray(preset.elevations_deg)
    order = np.argsort(elev)
    s = elev[order]
    i = np.clip(np.searchsorted(s, el), 1, len(s) - 1)
    left = np.abs(s[i - 1] - el) <= np.abs(s[i] - el)
    return order[np.where(left, i - 1, i)]


def _step_of(intensity: np.ndarray) -> tuple[float, str]:
    """The reporting step of intensities as a file stores them: whole numbers -> 1; reflectance in
    [0, 1] -> 0.01 (KITTI's)."""
    finite = intensity[np.isfinite(intensity)]
    if finite.size and np.all(finite == np.round(finite)):
        return 1.0, "intensity (whole numbers)"
    if finite.size and finite.max() <= 1.0:
        return 0.01, "reflectance 0..1"
    return 1.0, "intensity (rounded to 1)"


def read_nuscenes_bin(path: str | Path) -> ScanGrid:
    """A nuScenes ``LIDAR_TOP`` sweep (``.pcd.bin``). A full sweep is stored firing by firing, one point
    per ring, so it is already a grid (rings x firings); rays without a return are the points within
    :data:`NO_RETURN_M` of the sensor."""
    path = Path(path)
    raw = np.fromfile(path, np.float32)
    if raw.size % 5:
        raise RecordingError(f"{path}: {raw.size * 4} bytes are not rows of 5 float32 (x y z intensity ring)")
    a = raw.reshape(-1, 5).astype(np.float64)
    ring = a[:, 4].astype(np.int64)
    rings = int(ring.max()) + 1 if ring.size else 0
    xyz, inten = a[:, :3], a[:, 3]
    rng = np.linalg.norm(xyz, axis=1)
    if (
        rings
        and a.shape[0] % rings == 0
        and np.array_equal(ring, np.tile(np.arange(rings), a.shape[0] // rings))
    ):
        cols = a.shape[0] // rings
        shape = (cols, rings)
        r = rng.reshape(shape).T.copy()
        got = r >= NO_RETURN_M
        p = xyz.reshape(cols, rings, 3).transpose(1, 0, 2)
        out_xyz = np.where(got[..., None], p, np.nan)
        i = np.where(got, inten.reshape(shape).T, 0.0)
        # directions of rays without a return: the ring's median elevation at the firing's azimuth
        az = np.arctan2(p[..., 1], p[..., 0])
        el = np.arcsin(np.clip(p[..., 2] / np.maximum(r, 1e-9), -1, 1))
        el_ring = np.array([np.median(el[k, got[k]]) if got[k].any() else 0.0 for k in range(rings)])
        az_col = np.array(
            [
                np.angle(np.exp(1j * az[got[:, c], c]).mean()) if got[:, c].any() else np.nan
                for c in range(cols)
            ]
        )
        az_col = _fill_azimuths(az_col)
        e = el_ring[:, None]
        direction = np.stack(
            np.broadcast_arrays(np.cos(e) * np.cos(az_col), np.cos(e) * np.sin(az_col), np.sin(e)), -1
        )
        units = "nuScenes HDL-32E intensity 0..255"
        return ScanGrid(
            path.name, out_xyz, np.where(got, r, 0.0), i, direction, np.ones(r.shape, bool), 1.0, units
        )
    keep = rng >= NO_RETURN_M  # a sweep not stored firing by firing: binned by azimuth
    return grid_from_points(path.name, xyz[keep], inten[keep], ring[keep], 1.0, "nuScenes intensity 0..255")


def _fill_azimuths(az: np.ndarray) -> np.ndarray:
    """Azimuths (rad) of firings where none of the rays returned, interpolated along the sweep."""
    ok = np.isfinite(az)
    if ok.all() or not ok.any():
        return np.nan_to_num(az)
    idx = np.arange(az.size)
    unwrapped = np.unwrap(az[ok])
    return np.interp(idx, idx[ok], unwrapped)


def read_xyzi_bin(path: str | Path, preset: SensorPreset) -> ScanGrid:
    """A KITTI-layout ``.bin`` (float32 x, y, z, reflectance) of any sensor: rings from the nearest beam
    elevation of ``preset``, columns from the azimuth."""
    path = Path(path)
    raw = np.fromfile(path, np.float32)
    if raw.size % 4:
        raise RecordingError(f"{path}: {raw.size * 4} bytes are not rows of 4 float32 (x y z reflectance)")
    a = raw.reshape(-1, 4).astype(np.float64)
    keep = np.linalg.norm(a[:, :3], axis=1) >= NO_RETURN_M
    a = a[keep]
    step, units = _step_of(a[:, 3])
    return grid_from_points(path.name, a[:, :3], a[:, 3], rings_from_elevation(a[:, :3], preset), step, units)


RING_FIELDS = ("ring", "channel", "laser_number", "laser_id", "beam")
"""PCD fields that number a point's laser, as drivers name them (velodyne_pointcloud, Ouster's and
Hesai's ROS drivers: ``ring``; tier4/nebula: ``channel``; Argoverse 2: ``laser_number``)."""
INTENSITY_FIELDS = ("intensity", "i", "reflectivity", "signal")
"""PCD fields that hold the sensor's intensity, the first the file has is taken (Ouster's ROS driver
writes its signal as ``intensity`` beside ``reflectivity``)."""
RETURN_FIELDS = ("return_type", "return", "return_number", "dual_intensity")
"""Fields that mark which return of a ray a point is (dual-return clouds hold two points a ray; LAS:
``return_number``; VeloView's CSV: ``dual_intensity``, -1 or 1 on the two returns of a ray)."""


def _first_field(names: tuple[str, ...], choices: tuple[str, ...]) -> str | None:
    lower = {n.lower(): n for n in names}
    return next((lower[c] for c in choices if c in lower), None)


def _dual_columns(xyz: np.ndarray, ring: np.ndarray) -> int | None:
    """Columns a revolution of a dual-return cloud: 360 over the median azimuth step between neighbours
    of a ring, a ray's two returns (within 0.01 deg of each other: a text export rounds their
    coordinates apart) counted once; None where too few points tell."""
    az = np.degrees(np.arctan2(xyz[:, 1], xyz[:, 0]))
    d = np.concatenate([np.diff(np.sort(az[ring == r])) for r in np.unique(ring)] + [np.zeros(0)])
    d = d[(d > 0.01) & (d < 2.0)]
    return round(360.0 / float(np.median(d))) if d.size else None


def read_pcd_scan(path: str | Path, preset: SensorPreset) -> ScanGrid:
    """A PCD of one scan, read by :func:`scan_from_table`."""
    path = Path(path)
    return scan_from_table(path, path.name, read_pcd_table(path), preset, "PCD")


def scan_from_table(where: Path, name: str, pts: np.ndarray, preset: SensorPreset, kind: str) -> ScanGrid:
    """One scan's points as a file holds them (a structured array: a PCD's, a PointCloud2's): x, y, z,
    the intensity (:data:`INTENSITY_FIELDS`), the laser number (:data:`RING_FIELDS`, else the nearest
    beam elevation of ``preset``); points without a return (NaN, or within 0.5 m) are left out. A
    dual-return cloud (:data:`RETURN_FIELDS`) keeps each ray's strongest return. A ``kind`` (PCD,
    PointCloud2) without coordinates or without an intensity field is refused, naming ``where``. Beside
    an Ouster preset a ``reflectivity`` field is Ouster's calibrated reflectivity (ouster-cli's default
    ``--field``; an RNG15 profile's only one), its units saying so: the realism statistics leave its
    intensity statistics out, as an RNG15 capture's."""
    names = pts.dtype.names or ()
    if not {"x", "y", "z"} <= set(names):
        raise RecordingError(f"{where}: a {kind} without x, y, z fields ({' '.join(names)})")
    inten_field = _first_field(names, INTENSITY_FIELDS)
    if inten_field is None:
        raise RecordingError(
            f"{where}: a {kind} without an intensity field (one of {', '.join(INTENSITY_FIELDS)}; it has "
            f"{' '.join(n for n in names if not n.startswith('_pad'))}): the realism statistics need it"
        )
    xyz = np.stack([pts["x"], pts["y"], pts["z"]], -1).astype(np.float64)
    ok = np.all(np.isfinite(xyz), axis=1) & (np.linalg.norm(np.nan_to_num(xyz), axis=1) >= NO_RETURN_M)
    inten = pts[inten_field].astype(np.float64)
    ok &= np.isfinite(inten)
    ring_field = _first_field(names, RING_FIELDS)
    notes = []
    if ring_field is not None:
        ring = pts[ring_field].astype(np.int64)
        notes.append(f"rings from its {ring_field!r} field")
    else:
        ring = rings_from_elevation(xyz, preset)
        notes.append(f"no ring field: rings from the nearest beam elevation of {preset.name}")
    order = np.flatnonzero(ok)
    ret_field = _first_field(names, RETURN_FIELDS)
    columns = None
    if ret_field is not None:  # the first point of a cell is kept: put each ray's strongest first
        columns = _dual_columns(xyz[order], ring[order])
        order = order[np.argsort(-inten[order], kind="stable")]
        notes.append(f"dual returns ({ret_field!r}): each ray's strongest kept")
    step, units = _step_of(inten[order])
    if preset.name.upper().startswith("OS") and inten_field.lower() == "reflectivity":
        units = "Ouster reflectivity (0..255)"  # its intensity statistics are left out, as an RNG15's
    units = f"{units}, {kind} field {inten_field!r}"
    grid = grid_from_points(name, xyz[order], inten[order], ring[order], step, units, columns)
    grid.note = "; ".join(notes)
    return grid


def is_ouster_metadata(path: Path) -> bool:
    """``path`` is an Ouster sensor's metadata JSON (its beams' altitude angles, flat or nested)."""
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(meta, dict) and (
        "beam_altitude_angles" in meta or "beam_altitude_angles" in (meta.get("beam_intrinsics") or {})
    )


def ouster_metadata_beside(pcap: Path, why: str = "not Velodyne packets (1206-byte payloads)") -> Path:
    """The sensor metadata of an Ouster capture (a pcap, or a bag of its packets): ``<stem>.json`` beside
    it; else the metadata file whose name the capture's extends (``OS-1-128_1024x10.json`` for
    ``OS-1-128_1024x10_lb_n3.pcap``, as ouster-sdk's recordings and samples are named; ``<stem>_0.json``
    of a one-sensor recording), the longest such; else the only metadata file in its folder. ``why``
    begins the error where there is none."""
    beside = pcap.with_suffix(".json")
    if beside.exists():
        return beside
    found = [c for c in sorted(pcap.parent.glob("*.json")) if is_ouster_metadata(c)]
    stem = pcap.stem
    extended = [c for c in found if stem.startswith(c.stem)]
    longest = [c for c in extended if len(c.stem) == max(len(e.stem) for e in extended)]
    numbered = [c for c in found if c.stem.startswith(stem + "_")]
    for named in (longest, numbered):
        if len(named) == 1:
            return named[0]
    if len(found) != 1:
        raise RecordingError(
            f"{pcap}: {why}, and no single Ouster metadata .json "
            f"beside it ({pcap.with_suffix('.json').name}, one whose name the pcap's extends, or the "
            f"only one in its folder; found {len(found)}: {', '.join(c.name for c in found[:4])})"
        )
    return found[0]


_OTHER_VENDORS = {b"\xee\xff": "Hesai", b"\x55\xaa\x05\x0a\x5a\xa5\x50\xa0": "RoboSense (MSOP)"}
"""The first bytes of other vendors' lidar packets, told apart so they are not read as Ouster's."""


def detect_format(path: str | Path) -> str:
    """The key of :data:`FORMATS` that ``path`` holds, told from its name and its first bytes."""
    path = Path(path)
    if path.is_dir() and (path / "metadata.yaml").is_file():
        return "rosbag"
    if not path.is_file():
        raise RecordingError(f"{path}: no such file")
    name = path.name.lower()
    if name.endswith((".bag", ".mcap", ".db3")):
        return "rosbag"
    if name.endswith((".pcap", ".pcapng")):
        with path.open("rb") as fh:
            magic = fh.read(4)
        if magic not in (*PCAP_MAGICS, PCAPNG_MAGIC):
            raise RecordingError(f"{path}: neither a pcap nor a pcapng file (magic {magic.hex()})")
        seen: list[bytes] = []
        for k, rec in enumerate(read_pcap_udp(path)):
            if len(rec.payload) == 1206:
                return "velodyne-pcap"
            seen.append(rec.payload[:8])
            if k > 50:
                break
        for head, vendor in _OTHER_VENDORS.items():
            if sum(h.startswith(head) for h in seen) > len(seen) // 2:
                raise RecordingError(
                    f"{path}: {vendor} packets (they begin {head.hex(' ')}), which --real does not decode: "
                    "record the vendor's ROS driver's PointCloud2 in a bag, or write the scan as a PCD "
                    "(x y z intensity ring), and give that"
                )
        return "ouster-pcap"
    if name.endswith(".pcd.bin"):
        return "nuscenes-bin"
    if name.endswith(".bin"):
        return "kitti-bin"
    if name.endswith(".pcd"):
        return "pcd"
    for ext, fmt in ((".csv", "csv"), (".las", "las"), (".laz", "las"), (".ply", "ply")):
        if name.endswith(ext):
            return fmt
    raise RecordingError(
        f"{path}: format not known from its name; one of: "
        + "; ".join(f"{k}: {v}" for k, v in FORMATS.items())
    )


def _stored_ring_by_ring(path: Path, rings: int) -> bool:
    """The ``.bin``'s points run ring after ring (KITTI's raw order: the azimuth sweeps, then jumps back
    once a ring); a file in another order (a processed or shuffled cloud) gets its rings from elevation."""
    a = np.fromfile(path, np.float32)
    a = a[: a.size - a.size % 4].reshape(-1, 4)
    jumps = int(np.count_nonzero(np.diff(np.arctan2(a[:, 1], a[:, 0])) < 0))
    return jumps < 2 * rings


def read_real_scan(path: str | Path, preset: str | SensorPreset) -> ScanGrid:
    """One real scan on its firing grid, its format told from the file; ``preset`` is the sensor model
    it stands beside (its beam table gives rings to files that carry none)."""
    path = Path(path)
    fmt = detect_format(path)
    p = load_preset(preset) if isinstance(preset, str) else preset
    if fmt == "velodyne-pcap":
        head = next(rec.payload for rec in read_pcap_udp(path) if len(rec.payload) == 1206)
        from rt_lidar.validation.real_velodyne import PRESET_OF_PRODUCT

        # an HDL-64E's packets end in a status byte, not a product id: its preset is taken as named
        hdl64 = p.name.upper().startswith("HDL-64")
        return read_velodyne_pcap(path, p if hdl64 or head[-1] not in PRESET_OF_PRODUCT else None)
    if fmt == "ouster-pcap":
        return read_ouster_pcap(path, ouster_metadata_beside(path))
    if fmt == "rosbag":
        from rt_lidar.validation.real_bags import read_bag_scan

        return read_bag_scan(path, p)
    if fmt == "nuscenes-bin":
        return read_nuscenes_bin(path)
    if fmt == "kitti-bin":
        if p.name.upper().startswith("HDL-64") and _stored_ring_by_ring(path, p.n_rings):
            calib = path.parent / "calib.txt"
            return read_kitti_bin(path, calib if calib.exists() else None)
        return read_xyzi_bin(path, p)
    if fmt in ("csv", "las", "ply"):
        from rt_lidar.validation.real_tables import read_table_scan

        return read_table_scan(path, p)
    return read_pcd_scan(path, p)
