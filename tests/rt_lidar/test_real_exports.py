"""Real scans as viewers and vendor tools export them (``--real PRESET=FILE``, docs/realism.md "Your own
real scans"): VeloView's CSV, ouster-cli's CSV / PLY / LAS, LAS with a ring dimension (laspy), PLY in its
three encodings. Each is read back to the same scan as the frame it was made from, and a bad file is one
RecordingError naming it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial import cKDTree

from rt_lidar.errors import RecordingError
from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.real_formats import read_real_scan, scan_from_table
from rt_lidar.validation.real_tables import read_csv_table, read_ply_table
from rt_lidar.validation.realism_grid import ScanGrid
from tests.peers import needs_peer, peer_dir

DATA = Path(__file__).resolve().parents[1] / "data" / "real"
NUSCENES = DATA / "HDL-32E" / "nuscenes_LIDAR_TOP_1532402927647951.pcd.bin"
OS1_32 = DATA / "OS1-32" / "OS-1-32-G_v2.1.1_1024x10.pcap"


def _nuscenes() -> np.ndarray:
    """The nuScenes sweep's points (float32 x y z intensity ring), the source frame of the tests."""
    return np.fromfile(NUSCENES, np.float32).reshape(-1, 5)


def _source_scan(digits: int | None = None) -> ScanGrid:
    """The nuScenes sweep read as a cloud of x y z intensity ring (a PCD's or a PointCloud2's way); with
    ``digits``, its coordinates as a text export holds them (that many significant digits)."""
    a = _nuscenes()
    if digits is not None:
        a = a.astype(np.float64)
        a[:, :3] = [[float(f"{v:.{digits - 1}e}") for v in p] for p in a[:, :3]]
    t = np.zeros(len(a), [("x", "f8"), ("y", "f8"), ("z", "f8"), ("intensity", "f4"), ("ring", "u2")])
    for k, n in enumerate(t.dtype.names or ()):
        t[n] = a[:, k]
    return scan_from_table(NUSCENES, NUSCENES.name, t, load_preset("HDL-32E"), "PCD")


def _same_scan(got: ScanGrid, want: ScanGrid, atol: float = 0.0) -> None:
    assert got.range_m.shape == want.range_m.shape
    assert np.array_equal(got.returned, want.returned)
    assert np.allclose(got.range_m, want.range_m, rtol=0, atol=atol)
    assert np.array_equal(got.intensity, want.intensity)


def _veloview_csv(path: Path, a: np.ndarray, dual: bool = False) -> Path:
    """The sweep as VeloView's "Save As CSV" writes it (ParaView's spreadsheet writer): quoted header,
    the point array ``Points_m_XYZ`` as three columns, then the arrays vtkVelodyneHDLReader makes
    (``intensity``, ``laser_id``, ``azimuth`` in 0.01 deg, ``distance_m``, ``adjustedtime``,
    ``timestamp``; ``dual_distance``, ``dual_intensity`` in a dual-return capture: -1/1 on the two returns
    of a ray, the weaker -1). VTK's vtkCSVWriter writes a name ``"array:component"`` in quotes and a
    real number as ``std::scientific`` with precision 5 (``1.23457e+01``), an integer array as
    integers. Laid out from VeloView's and VTK's source; VeloView does not run here. With ``dual`` every
    third ray gains a weaker, 1.3x farther return written before it."""
    names = ["Points_m_XYZ:0", "Points_m_XYZ:1", "Points_m_XYZ:2", "intensity", "laser_id", "azimuth",
             "distance_m", "adjustedtime", "timestamp"]  # fmt: skip
    xyz = a[:, :3].astype(np.float64)
    az = np.round(np.mod(np.degrees(np.arctan2(xyz[:, 0], xyz[:, 1])), 360) * 100)
    rows = [xyz, a[:, 3:4], a[:, 4:5], az[:, None], np.linalg.norm(xyz, axis=1)[:, None]]
    rows += [np.arange(len(a))[:, None] * 1.5, np.arange(len(a))[:, None]]
    table = np.hstack(rows)
    if dual:
        names += ["dual_distance", "dual_intensity"]
        twin = table[::3].copy()
        twin[:, :3] = (a[::3, :3] * np.float32(1.3)).astype(np.float64)
        twin[:, 3] = a[::3, 3] // 2
        flags = np.zeros((len(table), 2))
        flags[::3] = 1  # the stronger, nearer return
        twin_flags = np.full((len(twin), 2), -1.0)
        table = np.vstack([np.hstack([twin, twin_flags]), np.hstack([table, flags])])
    lines = [",".join(f'"{n}"' for n in names)]
    real = {0, 1, 2, 6, 7}  # Points_m_XYZ (float), distance_m and adjustedtime (double)
    lines += [",".join(f"{v:.5e}" if k in real else str(int(v)) for k, v in enumerate(row)) for row in table]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_veloview_csv_reads_as_its_source_frame(tmp_path: Path) -> None:
    """Its points to the CSV's six digits (within 0.1 mm of the sweep's), lasers and intensities."""
    got = read_real_scan(_veloview_csv(tmp_path / "sweep.csv", _nuscenes()), "HDL-32E")
    _same_scan(got, _source_scan(digits=6))
    assert np.allclose(got.range_m, _source_scan().range_m, rtol=0, atol=1e-4)
    assert "VeloView CSV field 'intensity'" in got.units and "'laser_id'" in got.note


def test_veloview_dual_return_csv_keeps_each_rays_stronger_return(tmp_path: Path) -> None:
    """Before, a weaker farther return written first would have taken its ray's cell, and the two returns
    of a ray, rounded apart by the CSV's six digits, read as a finer azimuth step (1084 columns, not
    1083)."""
    a = _nuscenes()
    a = a[np.linalg.norm(a[:, :3], axis=1) >= 0.5]  # rays with a return (VeloView writes no others)
    got = read_real_scan(_veloview_csv(tmp_path / "dual.csv", a, dual=True), "HDL-32E")
    assert "strongest" in got.note
    want = _source_scan()
    both = got.returned & want.returned
    assert np.mean(got.range_m[both] / want.range_m[both] > 1.2) < 0.01
    assert np.mean(np.isclose(got.range_m, want.range_m)) > 0.95


def test_las_with_a_ring_dimension_reads_as_its_source_frame(tmp_path: Path) -> None:
    """laspy writes it (point format 3, a ``ring`` extra dimension, 1 um coordinates); the intensity
    stored as the sensor's 0..255, or stretched to 16 bits (x257), reads back the same."""
    import laspy

    a = _nuscenes()
    want = _source_scan()
    for stretch in (1, 257):
        h = laspy.LasHeader(point_format=3, version="1.4")
        h.add_extra_dim(laspy.ExtraBytesParams(name="ring", type=np.uint16))
        h.scales, h.offsets = np.array([1e-6] * 3), np.zeros(3)
        las = laspy.LasData(h)
        las.x, las.y, las.z = a[:, 0], a[:, 1], a[:, 2]
        las.intensity = a[:, 3].astype(np.uint16) * stretch
        las.ring = a[:, 4].astype(np.uint16)
        las.write(tmp_path / f"s{stretch}.las")
        got = read_real_scan(tmp_path / f"s{stretch}.las", "HDL-32E")
        _same_scan(got, want, atol=2e-6)
        assert "extra dimension 'ring'" in got.note
        assert ("/ 257" in got.note) == (stretch == 257)


def test_lidarview_las_reads_its_laser_id_and_keeps_the_stronger_return(tmp_path: Path) -> None:
    """As LidarView's vtkLASWriter writes a frame (PDAL's writers.las, LAS 1.4, ``extra_dims=all``):
    ``intensity`` as LAS intensity, ``adjustedtime`` as GPS time, every other array of VeloView's
    (``laser_id`` u8, ``azimuth`` u16, ``distance_m`` double, ``dual_intensity`` i32) an extra dimension.
    Laid out from LidarView's source with laspy (PDAL is not installed here). Every third ray has a
    weaker, 1.3x farther return written first, ``dual_intensity`` -1, its stronger twin 1."""
    import laspy

    a = _nuscenes()
    a = a[np.linalg.norm(a[:, :3], axis=1) >= 0.5]
    twin = a[::3].copy()
    twin[:, :3] *= np.float32(1.3)
    twin[:, 3] //= 2
    flags = np.zeros(len(a), np.int32)
    flags[::3] = 1
    pts = np.vstack([twin, a])
    h = laspy.LasHeader(point_format=1, version="1.4")
    for name, kind in (("laser_id", np.uint8), ("azimuth", np.uint16), ("distance_m", np.float64),
                       ("dual_intensity", np.int32)):  # fmt: skip
        h.add_extra_dim(laspy.ExtraBytesParams(name=name, type=kind))
    h.scales, h.offsets = np.array([1e-6] * 3), np.zeros(3)
    las = laspy.LasData(h)
    las.x, las.y, las.z = pts[:, 0], pts[:, 1], pts[:, 2]
    las.intensity = pts[:, 3].astype(np.uint16)
    las.gps_time = np.arange(len(pts)) * 1.5
    las.laser_id = pts[:, 4].astype(np.uint8)
    las.azimuth = np.round(np.mod(np.degrees(np.arctan2(pts[:, 0], pts[:, 1])), 360) * 100).astype(np.uint16)
    las.distance_m = np.linalg.norm(pts[:, :3], axis=1)
    las.dual_intensity = np.concatenate([np.full(len(twin), -1, np.int32), flags])
    las.write(tmp_path / "lidarview.las")
    got = read_real_scan(tmp_path / "lidarview.las", "HDL-32E")
    assert "extra dimension 'laser_id'" in got.note and "strongest" in got.note
    want = _source_scan()
    both = got.returned & want.returned
    assert np.mean(got.range_m[both] / want.range_m[both] > 1.2) < 0.01
    assert np.mean(np.isclose(got.range_m, want.range_m)) > 0.95


def test_laz_without_a_backend_and_a_cut_las_are_refused(tmp_path: Path) -> None:
    import laspy

    las = laspy.LasData(laspy.LasHeader(point_format=3, version="1.2"))
    las.x, las.y, las.z, las.intensity = np.ones(50), np.zeros(50), np.zeros(50), np.ones(50, np.uint16)
    las.write(tmp_path / "a.las")
    data = bytearray((tmp_path / "a.las").read_bytes())
    (tmp_path / "cut.las").write_bytes(data[: len(data) - 300])
    with pytest.raises(RecordingError, match=r"cut\.las: not a LAS file laspy can read"):
        read_real_scan(tmp_path / "cut.las", "HDL-32E")
    if laspy.LazBackend.detect_available():
        return
    data[104] |= 0x80  # the point format's compressed bit, as LAZ writers set it
    (tmp_path / "a.laz").write_bytes(bytes(data))
    with pytest.raises(RecordingError, match=r"a\.laz: a LAZ .*no LAZ backend is installed"):
        read_real_scan(tmp_path / "a.laz", "HDL-32E")


def _ply(path: Path, a: np.ndarray, fmt: str) -> Path:
    """The sweep as a PLY of ``fmt`` (Greg Turk's layout): CloudCompare's way, its scalar fields
    ``scalar_Intensity`` and ``scalar_ring``, after a comment and a ``camera`` element of one float."""
    dt = np.dtype([("x", "f4"), ("y", "f4"), ("z", "f4"), ("scalar_Intensity", "f4"), ("scalar_ring", "u2")])
    pts = np.zeros(len(a), dt)
    for k, n in enumerate(dt.names or ()):
        pts[n] = a[:, k]
    head = (
        f"ply\nformat {fmt} 1.0\ncomment made by a test\nelement camera 1\nproperty float view_px\n"
        f"element vertex {len(a)}\nproperty float x\nproperty float y\nproperty float z\n"
        "property float scalar_Intensity\nproperty ushort scalar_ring\nend_header\n"
    )
    if fmt == "ascii":
        rows = [f"{p[0]!r} {p[1]!r} {p[2]!r} {p[3]!r} {p[4]}\n" for p in pts.tolist()]
        body = ("0.5\n" + "".join(rows)).encode()
    else:
        big = fmt == "binary_big_endian"
        camera = np.array([0.5], ">f4" if big else "<f4").tobytes()
        body = camera + pts.astype(dt.newbyteorder(">" if big else "<")).tobytes()
    path.write_bytes(head.encode() + body)
    return path


@pytest.mark.parametrize("fmt", ["ascii", "binary_little_endian", "binary_big_endian"])
def test_ply_reads_as_its_source_frame(tmp_path: Path, fmt: str) -> None:
    got = read_real_scan(_ply(tmp_path / "s.ply", _nuscenes(), fmt), "HDL-32E")
    _same_scan(got, _source_scan())
    assert "PLY field 'intensity'" in got.units and "'ring'" in got.note


def test_bad_plys_are_refused_naming_the_file_and_the_fault(tmp_path: Path) -> None:
    data = _ply(tmp_path / "s.ply", _nuscenes()[:100], "binary_little_endian").read_bytes()
    (tmp_path / "cut.ply").write_bytes(data[:-40])
    with pytest.raises(RecordingError, match=r"cut\.ply: PLY says 100 vertices .* the file holds"):
        read_real_scan(tmp_path / "cut.ply", "HDL-32E")
    (tmp_path / "odd.ply").write_bytes(data.replace(b"binary_little_endian", b"binary_middle_endian"))
    with pytest.raises(RecordingError, match=r"odd\.ply: PLY format 'binary_middle_endian'"):
        read_real_scan(tmp_path / "odd.ply", "HDL-32E")
    (tmp_path / "no.ply").write_bytes(b"PK\x03\x04 a zip")
    with pytest.raises(RecordingError, match=r"no\.ply: not a PLY file"):
        read_real_scan(tmp_path / "no.ply", "HDL-32E")
    plain = data.replace(b"scalar_Intensity", b"scalar_Height__")
    (tmp_path / "noi.ply").write_bytes(plain)
    with pytest.raises(RecordingError, match=r"noi\.ply: a PLY without an intensity field"):
        read_real_scan(tmp_path / "noi.ply", "HDL-32E")


def test_bad_csvs_are_refused_naming_the_file_and_the_fault(tmp_path: Path) -> None:
    good = _veloview_csv(tmp_path / "s.csv", _nuscenes()[:200]).read_text()
    (tmp_path / "cut.csv").write_text(good[: len(good) // 2])  # its last row cut inside
    with pytest.raises(RecordingError, match=r"cut\.csv: (rows that are not numbers|its rows have)"):
        read_real_scan(tmp_path / "cut.csv", "HDL-32E")
    head, _, rest = good.partition("\n")
    (tmp_path / "cols.csv").write_text(head.replace("Points_m_XYZ", "Pos") + "\n" + rest)
    with pytest.raises(RecordingError, match=r"cols\.csv: a CSV without coordinate columns .*pos:0"):
        read_real_scan(tmp_path / "cols.csv", "HDL-32E")
    (tmp_path / "noi.csv").write_text(head.replace('"intensity"', '"gain"') + "\n" + rest)
    with pytest.raises(RecordingError, match=r"noi\.csv: a VeloView CSV without an intensity field"):
        read_real_scan(tmp_path / "noi.csv", "HDL-32E")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(RecordingError, match=r"empty\.csv: an empty CSV"):
        read_real_scan(tmp_path / "empty.csv", "HDL-32E")


def _ouster_cli(tmp_path: Path, *args: str) -> None:
    """ouster-sdk's own ``ouster-cli source OS1_32 ... save`` (its peer venv)."""
    cli = peer_dir("ouster") / "bin" / "ouster-cli"
    proc = subprocess.run([str(cli), "source", str(OS1_32), *args], capture_output=True, text=True,
                          timeout=180, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]


@needs_peer("ouster")
def test_ouster_cli_csv_reads_as_the_capture(tmp_path: Path) -> None:
    """``ouster-cli source X.pcap save out.csv`` (ouster-sdk 1.0): each ring (the CSV's ROW) holds the
    capture's returns with their signal; ranges within 2 cm (the CSV's X1 Y1 Z1 are in the sensor frame,
    the capture's ranges from the beam's origin: the OS1's 15.8 mm beam offset and 36 mm lidar height)."""
    _ouster_cli(tmp_path, "save", "out.csv")
    (csv,) = tmp_path.glob("out_s0_*.csv")
    got, want = read_real_scan(csv, "OS1-64"), read_real_scan(OS1_32, "OS1-64")
    assert "ROW" in got.note and got.units.startswith("Ouster signal (photons)")
    assert got.range_m.shape == want.range_m.shape
    for k in range(want.range_m.shape[0]):
        a, b = want.returned[k], got.returned[k]
        assert a.sum() == b.sum() > 0, k
        assert np.array_equal(np.sort(want.intensity[k][a]), np.sort(got.intensity[k][b])), k
        assert np.abs(np.sort(want.range_m[k][a]) - np.sort(got.range_m[k][b])).max() < 0.02, k


@needs_peer("ouster")
def test_ouster_cli_ply_and_las_hold_the_csvs_points(tmp_path: Path) -> None:
    """``save --decimate False --field SIGNAL out.ply`` (binary, and ``--ascii``) and ``out.las`` of the
    same frame: the CSV's returns (to its 0.1 mm; LAS: laspy's 1 cm) with their signal; without a ring
    the PLY's lasers come from the preset's elevations, and both encodings read to one scan."""
    _ouster_cli(tmp_path, "save", "out.csv")
    for extra, name in (([], "b.ply"), (["--ascii"], "a.ply"), ([], "c.las")):
        _ouster_cli(
            tmp_path, "slice", "0:1", "save", "--decimate", "False", "--field", "SIGNAL", *extra, name
        )
    (csv,) = tmp_path.glob("out_s0_*.csv")
    table, kind = read_csv_table(csv)
    assert kind == "ouster-cli CSV"
    ret = table[np.isfinite(table["x"])]
    ply = read_ply_table(tmp_path / "b.ply")
    assert ply.dtype.names == ("x", "y", "z", "signal") and len(ply) == len(ret)
    # the same points in another order: each PLY point's nearest CSV point is within the CSV's rounding
    xyz = np.stack([ply["x"], ply["y"], ply["z"]], -1).astype(np.float64)
    dist, idx = cKDTree(np.stack([ret["x"], ret["y"], ret["z"]], -1)).query(xyz)
    assert dist.max() < 1e-4 and np.unique(idx).size == len(ply)
    assert np.array_equal(ply["signal"], ret["signal"][idx])
    a, b = read_real_scan(tmp_path / "a.ply", "OS1-64"), read_real_scan(tmp_path / "b.ply", "OS1-64")
    assert np.array_equal(a.range_m, b.range_m) and np.array_equal(a.intensity, b.intensity)
    assert "nearest beam elevation of OS1-64" in b.note and b.units.startswith("intensity")
    # ouster-cli's default --field REFLECTIVITY beside the OS1-64: Ouster reflectivity, not a signal
    _ouster_cli(tmp_path, "slice", "0:1", "save", "--decimate", "False", "r.ply")
    assert read_real_scan(tmp_path / "r.ply", "OS1-64").units.startswith("Ouster reflectivity")
    las = read_real_scan(tmp_path / "c.las", "OS1-64")
    assert las.returned.sum() == pytest.approx(b.returned.sum(), rel=0.02)
    assert np.isclose(las.intensity[las.returned].mean(), b.intensity[b.returned].mean(), rtol=0.02)


OS0_128 = DATA / "OS0-128" / "OS-0-128-U1_v2.3.0_1024x10.pcap"


@needs_peer("ouster")
def test_ouster_cli_csv_of_a_reflectivity_profile_reads_as_the_capture(tmp_path: Path) -> None:
    """ouster-sdk's OS-0-128 sample (RNG15_RFL8_NIR8: no SIGNAL column) saved by ouster-cli: read as the
    capture is, Ouster reflectivity, so beside the OS1-64 its intensity statistics are left out as the
    capture's are (before: its reflectivity would have been compared as a signal). The sample holds one
    frame."""
    from rt_lidar.validation.real_frames import RealFrame
    from rt_lidar.validation.realism_experiment import _measure_real

    cli = peer_dir("ouster") / "bin" / "ouster-cli"
    proc = subprocess.run([str(cli), "source", str(OS0_128), "save", "o.csv"],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (csv,) = tmp_path.glob("o_s0_*.csv")
    got, want = read_real_scan(csv, "OS1-64"), read_real_scan(OS0_128, "OS1-64")
    assert got.units.startswith("Ouster reflectivity") and want.units.startswith("Ouster reflectivity")
    # its one frame's returns, ring by ring; a cloud's points within 0.5 m are left out (the floor under
    # the OS0's lowest beams is nearer), measured in the sensor frame, a few cm from the beam's range:
    # near that cut a few low-ring points differ
    diff = np.abs(got.returned.sum(1) - (want.range_m >= 0.5).sum(1))
    assert diff[:100].max() == 0 and diff.sum() <= 0.005 * want.returned.sum()
    measured = _measure_real(RealFrame("OS1-64", csv, "os0 csv", "user"))
    assert "intensity statistics left out" in measured["read_as"]
    assert measured["statistics"]["ground_falloff_20_30_over_0_10"] is None


@needs_peer("ouster")
def test_ouster_cli_csv_of_a_dual_profile_keeps_each_pixels_stronger_return(tmp_path: Path) -> None:
    """A dual-return profile's CSV as ouster-cli's source lays it out (``RANGE2 (mm)``, ``SIGNAL2
    (photons)`` after their first-return columns, ``X2 (m) Y2 (m) Z2 (m)`` last), made from ouster-cli's
    single-return CSV of the OS1-32 capture: every third pixel with a return gains a weaker second
    return 1.3x farther. It reads as the single-return CSV (before, its second returns went unread; and
    ``REFLECTIVITY`` would have been taken for the intensity were ``ROW`` not told apart)."""
    _ouster_cli(tmp_path, "save", "out.csv")
    (csv,) = tmp_path.glob("out_s0_*.csv")
    lines = csv.read_text().splitlines()
    names = lines[1].lstrip("# ").split(", ")
    vals = np.loadtxt(lines[2:], delimiter=",")
    second = (vals[:, names.index("RANGE (mm)")] > 0) & (np.arange(len(vals)) % 3 == 0)
    rng2 = np.where(second, vals[:, names.index("RANGE (mm)")] * 1.3, 0).round()
    sig2 = np.where(second, vals[:, names.index("SIGNAL (photons)")] // 2, 0)
    xyz2 = np.where(second[:, None], vals[:, [names.index(f"{c}1 (m)") for c in "XYZ"]] * 1.3, 0)
    cols = [
        *names[:7],
        "RANGE2 (mm)",
        *names[7:9],
        "SIGNAL2 (photons)",
        *names[9:],
        "X2 (m)",
        "Y2 (m)",
        "Z2 (m)",
    ]
    assert names[6] == "RANGE (mm)" and names[8] == "SIGNAL (photons)"
    table = np.hstack([vals[:, :7], rng2[:, None], vals[:, 7:9], sig2[:, None], vals[:, 9:], xyz2])
    dual = tmp_path / "dual.csv"
    body = "\n".join(
        ",".join(f"{v:.4f}" if k >= len(cols) - 6 else str(int(v)) for k, v in enumerate(r)) for r in table
    )
    dual.write_text(f"# frame num: 0\n# {', '.join(cols)}\n{body}\n")
    got, want = read_real_scan(dual, "OS1-64"), read_real_scan(csv, "OS1-64")
    assert "strongest" in got.note and got.units.startswith("Ouster signal")
    assert got.range_m.shape == want.range_m.shape
    assert np.array_equal(got.returned, want.returned) and np.array_equal(got.intensity, want.intensity)
    assert np.array_equal(got.range_m, want.range_m)
