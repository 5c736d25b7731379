"""Real scans from the exports of viewers and vendor tools (``--real PRESET=FILE``): each read into a table
of its points and handed to :func:`~rt_lidar.validation.real_formats.scan_from_table`, as a PCD is.

- ``.csv``: VeloView's or LidarView's "Save As CSV" (ParaView's spreadsheet writer: a quoted header,
  ``"Points_m_XYZ:0"`` .. ``":2"`` or ``"Points:0"`` .. ``":2"``, ``"intensity"``, ``"laser_id"``,
  ``"azimuth"``, ``"distance_m"``, ``"adjustedtime"``, ``"timestamp"``, ``"vertical_angle"``, and in a
  dual-return capture ``"dual_distance"``, ``"dual_intensity"``, two points a ray); ouster-cli's
  ``source X.pcap save out.csv`` (a ``# frame num`` line, then ``# TIMESTAMP (ns), ROW, DESTAGGERED IMAGE
  COLUMN, MEASUREMENT_ID, ..., RANGE (mm), SIGNAL (photons), REFLECTIVITY (%), ..., X1 (m), Y1 (m), Z1 (m)``
  and, dual, ``X2 (m)`` ..: one line a pixel of the 2-D frame, its ``ROW`` the laser); or any CSV whose
  header names x, y, z and an intensity (CloudCompare's ``//X,Y,Z,Intensity``).
- ``.las`` / ``.laz`` (laspy; LAZ needs its lazrs or laszip backend): ``intensity`` (16 bits), the laser
  from an extra dimension (``ring``, ``laser_id``, ``channel``, ...), ``return_number`` where a pulse has
  several (LidarView's LAS writer, PDAL with ``extra_dims=all``: VeloView's arrays ``laser_id``,
  ``dual_intensity``, ... as extra dimensions).
- ``.ply`` (ascii, binary little or big endian; ouster-cli's and CloudCompare's exports): the ``vertex``
  element's properties read as a PCD's fields (CloudCompare's ``scalar_`` prefix taken off).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np

from rt_lidar.errors import RecordingError
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.validation.real_formats import INTENSITY_FIELDS, RING_FIELDS, scan_from_table
from rt_lidar.validation.realism_grid import ScanGrid

__all__ = [
    "LAS_RING_DIMENSIONS",
    "OUSTER_CSV",
    "PLY_TYPES",
    "read_csv_table",
    "read_las_table",
    "read_ply_table",
    "read_table_scan",
]

PLY_TYPES = {
    "char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1", "short": "i2", "int16": "i2",
    "ushort": "u2", "uint16": "u2", "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4",
    "float": "f4", "float32": "f4", "double": "f8", "float64": "f8",
}  # fmt: skip
"""PLY's scalar property types (Greg Turk's PLY, and the sized names of later writers) as NumPy's."""

_XYZ_COLUMNS = (
    ("points_m_xyz:0", "points_m_xyz:1", "points_m_xyz:2"),  # VeloView / LidarView
    ("points:0", "points:1", "points:2"),  # ParaView's spreadsheet of a plain point set
    ("x1", "y1", "z1"),  # ouster-cli: the first return
    ("x", "y", "z"),
)
"""Coordinate columns of the CSV exports read, the first triple a header has taken (lower case, a unit
in brackets left off)."""


def _split_header(line: str) -> list[str]:
    """A CSV header's names, their quotes and a unit in brackets (``RANGE (mm)``) left off, lower case
    (``"Points_m_XYZ:0"`` as VTK's vtkCSVWriter names an array's component; ``Points_m_XYZ_0`` too)."""
    cells = next(csv.reader([line]), [])
    names = [re.sub(r"\s*\(.*\)\s*$", "", c.strip().strip('"').strip()).lower() for c in cells]
    # a component as ParaView's spreadsheet export names it ("Points_0") read as VTK's CSV writer's
    return [re.sub(r"^(points(?:_m_xyz)?)_([012])$", r"\1:\2", n) for n in names]


def read_csv_table(path: str | Path) -> tuple[np.ndarray, str]:
    """A CSV export as (a structured array of x, y, z, the intensity, the laser and the return where the
    file has them; the export's name). A file whose header names no coordinates, or whose rows are not
    numbers of the header's count (a file cut inside a row), is a :class:`RecordingError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{path}: not a text CSV ({exc})") from None
    lines = text.splitlines()
    k = 0
    header: str | None = None
    while k < len(lines) and (lines[k].startswith("#") or not lines[k].strip()):
        if lines[k].startswith("#") and "," in lines[k]:
            header = lines[k].lstrip("#")  # ouster-cli: numpy's savetxt comments the header out
        k += 1
    if header is None:
        if k >= len(lines):
            raise RecordingError(f"{path}: an empty CSV (no header, no rows)")
        header = lines[k][2:] if lines[k].startswith("//") else lines[k]  # CloudCompare: "//X,Y,Z"
        k += 1
    names = _split_header(header)
    body = [ln for ln in lines[k:] if ln.strip()]
    if not body:
        raise RecordingError(f"{path}: a CSV header and no rows")
    try:
        rows = np.loadtxt(body, delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise RecordingError(f"{path}: rows that are not numbers of its header's columns ({exc})") from None
    if rows.shape[1] != len(names):
        raise RecordingError(f"{path}: its rows have {rows.shape[1]} values, its header {len(names)} names")
    col = {n: rows[:, i] for i, n in enumerate(names)}
    xyz = next((t for t in _XYZ_COLUMNS if all(c in col for c in t)), None)
    if xyz is None:
        raise RecordingError(
            f"{path}: a CSV without coordinate columns (Points_m_XYZ:0..2, Points:0..2, X1 (m).., or x y z; "
            f"its header: {', '.join(names[:16])})"
        )
    if "row" in col and "range" in col and ("signal" in col or "reflectivity" in col):
        return _ouster_table(col, xyz), OUSTER_CSV
    fields = {"x": col[xyz[0]], "y": col[xyz[1]], "z": col[xyz[2]]}
    for n in names:
        if n in INTENSITY_FIELDS or n in RING_FIELDS:
            fields.setdefault(n, col[n])
    if "dual_intensity" in col and np.any(col["dual_intensity"] != 0):  # 0 on every point: one return
        fields["dual_intensity"] = col["dual_intensity"]
    kind = "VeloView CSV" if xyz[0].startswith("points") else "CSV"
    return _table(fields), kind


OUSTER_CSV = "ouster-cli CSV"
"""The name :func:`read_csv_table` gives ouster-cli's CSV export."""


def _table(fields: dict[str, np.ndarray]) -> np.ndarray:
    """Columns of one length as a structured array of float64 fields, named as the dict's keys."""
    out = np.zeros(len(next(iter(fields.values()))), [(n, "f8") for n in fields])
    for n, v in fields.items():
        out[n] = v
    return out


def _ouster_table(col: dict[str, np.ndarray], xyz: tuple[str, str, str]) -> np.ndarray:
    """ouster-cli's CSV (or an older ouster-sdk example's, ``X (m)`` for ``X1 (m)``): a point a pixel and
    return, the laser its ``ROW``; ``SIGNAL`` (photons) as the intensity where the profile has it (as
    Ouster captures are read), else ``REFLECTIVITY``; a dual profile's second return (``X2``,
    ``SIGNAL2``) as a second point, the stronger kept."""
    inten = "signal" if "signal" in col else "reflectivity"
    parts = [(*xyz, inten, 1)]
    if all(c in col for c in ("x2", "y2", "z2", inten + "2")):
        parts.append(("x2", "y2", "z2", inten + "2", 2))
    tables = []
    for x, y, z, i, ret in parts:
        rng = col.get("range" if ret == 1 else "range2")
        xs = [col[x], col[y], col[z]]
        if rng is not None:  # a pixel without a return keeps its beam's origin offset as X, Y, Z
            xs = [np.where(rng > 0, v, np.nan) for v in xs]
        fields = {"x": xs[0], "y": xs[1], "z": xs[2], inten: col[i], "ring": col["row"]}
        if len(parts) > 1:
            fields["return_type"] = np.full(len(col[x]), float(ret))
        tables.append(_table(fields))
    return np.concatenate(tables)


def read_ply_table(path: str | Path) -> np.ndarray:
    """The ``vertex`` element of a PLY (ascii, binary little or big endian) as a structured array of its
    scalar properties (CloudCompare's ``scalar_`` prefix left off). Elements before ``vertex`` are
    passed over (scalar ones only); a header that is not PLY, a list property of a vertex, or a body
    shorter than its counts is a :class:`RecordingError` naming the file."""
    path = Path(path)
    data = path.read_bytes()
    if not data.startswith(b"ply"):
        raise RecordingError(f"{path}: not a PLY file (it does not begin with 'ply')")
    end = data.find(b"end_header")
    if end < 0:
        raise RecordingError(f"{path}: a PLY header without end_header")
    pos = data.index(b"\n", end) + 1 if b"\n" in data[end:] else len(data)
    fmt = ""
    elements: list[tuple[str, int, list[tuple[str, str]]]] = []
    for raw in data[:end].decode("ascii", "replace").splitlines()[1:]:
        w = raw.split()
        if not w or w[0] in ("comment", "obj_info"):
            continue
        if w[0] == "format" and len(w) >= 2:
            fmt = w[1]
        elif w[0] == "element" and len(w) == 3 and w[2].isdigit():
            elements.append((w[1], int(w[2]), []))
        elif w[0] == "property" and elements and len(w) == 3 and w[1] in PLY_TYPES:
            elements[-1][2].append((w[2], PLY_TYPES[w[1]]))
        elif w[0] == "property" and elements and len(w) == 5 and w[1] == "list":
            elements[-1][2].append((w[4], "list"))
        else:
            raise RecordingError(f"{path}: a PLY header line it cannot read: {raw.strip()!r}")
    order = {"binary_little_endian": "<", "binary_big_endian": ">", "ascii": ""}
    if fmt not in order:
        raise RecordingError(f"{path}: PLY format {fmt!r} (ascii, binary_little_endian or binary_big_endian)")
    names = [e[0] for e in elements]
    if "vertex" not in names:
        raise RecordingError(f"{path}: a PLY without a vertex element (it has {', '.join(names) or 'none'})")
    body = data[pos:]
    text_rows = body.decode("ascii", "replace").splitlines() if fmt == "ascii" else []
    offset = 0
    for name, count, props in elements:
        if any(t == "list" for _, t in props):
            raise RecordingError(f"{path}: a list property in PLY element {name!r} before or in the vertices")
        dt = np.dtype([(_ply_name(p), order[fmt] + t) for p, t in props])
        if name != "vertex":
            offset += count if fmt == "ascii" else count * dt.itemsize
            continue
        if fmt == "ascii":
            rows = text_rows[offset : offset + count]
            if len(rows) < count:
                raise RecordingError(
                    f"{path}: PLY says {count:,} vertices, the file holds {len(rows):,} rows"
                )
            try:
                vals = np.loadtxt(rows, dtype=np.float64, ndmin=2) if count else np.zeros((0, len(props)))
            except ValueError as exc:
                raise RecordingError(f"{path}: PLY vertex rows that are not numbers ({exc})") from None
            if vals.shape[1] != len(props):
                raise RecordingError(
                    f"{path}: PLY vertex rows of {vals.shape[1]} values, {len(props)} properties"
                )
            out = np.zeros(count, dt)
            for k, n in enumerate(dt.names or ()):
                out[n] = vals[:, k]
            return out
        need = count * dt.itemsize
        if offset + need > len(body):
            raise RecordingError(
                f"{path}: PLY says {count:,} vertices of {dt.itemsize} bytes ({need:,} bytes), the file "
                f"holds {max(len(body) - offset, 0):,} after the header"
            )
        return np.frombuffer(body, dt, count, offset).astype(dt.newbyteorder("="))
    raise AssertionError("unreachable: vertex is among the elements")


def _ply_name(prop: str) -> str:
    """CloudCompare writes its scalar fields as ``scalar_<name>``: the name, where it is a known one."""
    low = prop.lower()
    if low.startswith("scalar_") and low[7:] in (*INTENSITY_FIELDS, *RING_FIELDS):
        return low[7:]
    return prop


LAS_RING_DIMENSIONS = (*RING_FIELDS, "laser", "line")
"""Extra dimensions of a LAS point that number its laser, as exporters name them."""


def read_las_table(path: str | Path) -> tuple[np.ndarray, str]:
    """A LAS/LAZ file's points as a structured array (x, y, z, ``intensity``, the laser from an extra
    dimension where there is one, ``return_number`` where a pulse has several) and how its intensity
    was scaled. A file laspy cannot read, or a LAZ without a laszip backend installed, is a
    :class:`RecordingError` naming the file."""
    import laspy

    path = Path(path)
    try:
        with laspy.open(path) as fh:
            compressed = fh.header.are_points_compressed
            if compressed and not laspy.LazBackend.detect_available():
                raise RecordingError(
                    f"{path}: a LAZ (compressed LAS) and no LAZ backend is installed: "
                    "pip install 'laspy[lazrs]' (or decompress it with laszip/pdal to a .las)"
                )
            las = fh.read()
    except RecordingError:
        raise
    except Exception as exc:  # laspy raises LaspyException, ValueError, EOFError for bad files
        raise RecordingError(f"{path}: not a LAS file laspy can read ({type(exc).__name__}: {exc})") from None
    n = len(las.points)
    if n == 0:
        raise RecordingError(f"{path}: a LAS file without points")
    inten = np.asarray(las.intensity, np.float64)
    scale = ""
    nonzero = inten[inten > 0]
    if nonzero.size and nonzero.max() > 255:
        for k in (257, 256):  # an 8-bit intensity stretched to LAS's 16 bits (x257: 255 -> 65535)
            if np.all(nonzero % k == 0):
                inten = inten / k
                scale = f"16-bit LAS intensity / {k} (an 8-bit intensity stretched x{k})"
                break
        else:
            scale = "16-bit LAS intensity 0..65535 as stored"
    else:
        scale = "LAS intensity as stored (0..255)"
    fields = {
        "x": np.asarray(las.x, np.float64),
        "y": np.asarray(las.y, np.float64),
        "z": np.asarray(las.z, np.float64),
        "intensity": inten,
    }
    extra = {d.lower(): d for d in las.point_format.extra_dimension_names}
    ring = next((extra[d] for d in LAS_RING_DIMENSIONS if d in extra), None)
    if ring is not None:
        fields["ring"] = np.asarray(las[ring], np.float64)
        scale += f"; laser from its extra dimension {ring!r}"
    dual = np.asarray(las[extra["dual_intensity"]], np.float64) if "dual_intensity" in extra else None
    returns = np.asarray(las.number_of_returns)
    if dual is not None and np.any(dual != 0):  # LidarView's LAS: VeloView's arrays as extra dimensions
        fields["dual_intensity"] = dual
    elif returns.size and returns.max() > 1:
        fields["return_number"] = np.asarray(las.return_number, np.float64)
    return _table(fields), scale


def read_table_scan(path: str | Path, preset: SensorPreset) -> ScanGrid:
    """A CSV, PLY or LAS/LAZ export on its firing grid (:func:`scan_from_table`), how it was read said in
    the grid's note (an Ouster ``reflectivity``: :func:`scan_from_table`)."""
    path = Path(path)
    name = path.name.lower()
    extra = ""
    if name.endswith(".csv"):
        pts, kind = read_csv_table(path)
        if kind == OUSTER_CSV:
            extra = "the laser is the CSV's ROW (a row of Ouster's 2-D frame)"
    elif name.endswith(".ply"):
        pts, kind = read_ply_table(path), "PLY"
    else:
        pts, extra = read_las_table(path)
        kind = "LAZ" if name.endswith(".laz") else "LAS"
    grid = scan_from_table(path, path.name, pts, preset, kind)
    if kind == OUSTER_CSV:  # the units Ouster captures are read in
        signal = "signal" in (pts.dtype.names or ())
        grid.units = "Ouster signal (photons)" if signal else "Ouster reflectivity (0..255)"
        grid.units += f", {kind} column {'SIGNAL' if signal else 'REFLECTIVITY'}"
    if extra:
        grid.note = f"{grid.note}; {extra}" if grid.note else extra
    return grid
