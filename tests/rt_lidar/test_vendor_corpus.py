"""More real vendor calibration files (tests/data/vendor, see its README): each one imports with the
beam count of its product and the angles the file holds, read here by small independent readers (json,
PyYAML, ElementTree, csv, struct) rather than by rt_lidar's parsers; files without a beam table are
refused in one line (exit 2 from the CLI)."""

from __future__ import annotations

import codecs
import csv
import json
import math
import os
import struct
import subprocess
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from rt_lidar.cli.main import main as cli_main
from rt_lidar.errors import RtLidarError
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.vendor import preset_from_vendor_file
from rt_lidar.sensor.vendor.models import find_model

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "vendor"

# file -> (vendor, model, beams): the products' beam counts; the model from the file's own words
CORPUS: dict[str, tuple[str, str, int]] = {
    "ouster/1_12_os1-991913000010-64.json": ("Ouster", "OS1 gen1", 64),
    "ouster/1_14_6cccd_os-882002000138-128_legacy.json": ("Ouster", "OS0", 128),
    "ouster/2_0_0_os1-992008000494-128_col_win_legacy.json": ("Ouster", "OS1", 128),
    "ouster/2_5_0_os-992146000760-128.json": ("Ouster", "OS1", 128),
    "ouster/OS-0-128-U1_v2.3.0_1024x10.json": ("Ouster", "OS0", 128),
    "ouster/OS-0-128_v3.0.1_1024x10.json": ("Ouster", "OS0", 128),
    "ouster/OS-1-128_v2.3.0_1024x10.json": ("Ouster", "OS1", 128),
    "ouster/OS-1-32-G_v2.1.1_1024x10.json": ("Ouster", "OS1", 32),
    "ouster/OS-1-64_sensor_config_reduced.json": ("Ouster", "OS1", 64),
    "ouster/OS-2-32-U0_v2.0.0_1024x10.json": ("Ouster", "OS2", 32),
    "ouster/duplicate_id.json": ("Ouster", "OS2", 128),
    "ouster/1_12_os1-991913000010-64_config_param.json": ("Ouster", "OS1 gen1", 64),
    "velodyne/64e_s3-xiesc.yaml": ("Velodyne", "HDL-64E", 64),
    "velodyne/64e_utexas.yaml": ("Velodyne", "HDL-64E", 64),
    "velodyne/VLP16_hires_db.yaml": ("Velodyne", "Puck Hi-Res", 16),
    "velodyne/VeloView-VLP-32C.yaml": ("Velodyne", "VLP-32C", 32),
    "velodyne/angles-calibrated.yaml": ("Velodyne", "HDL-64E", 64),
    "velodyne/ros_VLS128.yaml": ("Velodyne", "VLS-128", 128),
    "velodyne/HDL-64E_S3-VeloView.yml": ("Velodyne", "HDL-64E", 64),
    "velodyne/VLP-32B.yml": ("Velodyne", "VLP-32B", 32),
    "velodyne/VLP-32C.yml": ("Velodyne", "VLP-32C", 32),
    "velodyne/nebula_HDL64e_s3.yaml": ("Velodyne", "HDL-64E", 64),
    "velodyne/nebula_VLP32MR.yaml": ("Velodyne", "VLP-32C", 32),
    "velodyne/ros_32db.xml": ("Velodyne", "HDL-32E", 32),
    "velodyne/ros_64e_s2.1-sztaki.xml": ("Velodyne", "HDL-64E", 64),
    "velodyne/test_db_without_intensities.xml": ("Velodyne", "HDL-64E", 64),
    "velodyne/HDL-128.xml": ("Velodyne", "VLS-128", 128),
    "velodyne/HDL-64.xml": ("Velodyne", "HDL-64E", 64),
    "velodyne/Puck LITE.xml": ("Velodyne", "Puck LITE", 16),
    "velodyne/VLP-32a.xml": ("Velodyne", "VLP-32A", 32),
    "velodyne/VLP-32b.xml": ("Velodyne", "VLP-32B", 32),
    "velodyne/HDL-32_2014.xml": ("Velodyne", "HDL-32E", 32),
    "hesai/Pandar128E3X_Angle Correction File.csv": ("Hesai", "Pandar128E3X", 128),
    "hesai/Pandar40M_Angle Correction File.csv": ("Hesai", "Pandar40M", 40),
    "hesai/Pandar90E3X_Angle Correction File.csv": ("Hesai", "Pandar90", 90),
    "hesai/PandarXT_Angle Correction File.csv": ("Hesai", "PandarXT-32", 32),
    "hesai/XT32M2X_Angle Correction File.csv": ("Hesai", "PandarXT-32M2X", 32),
    "hesai/OT128_40_Angle Correction File.csv": ("Hesai", "Pandar40P", 40),
    "hesai/AT128E3X_Angle Correction File.dat": ("Hesai", "AT128", 128),
    "hesai/nebula_Pandar128E4X.csv": ("Hesai", "OT128", 128),
    "hesai/nebula_Pandar40P.csv": ("Hesai", "Pandar40P", 40),
    "hesai/nebula_Pandar64.csv": ("Hesai", "Pandar64", 64),
    "hesai/nebula_PandarQT128.csv": ("Hesai", "PandarQT128", 128),
    "hesai/nebula_PandarQT64.csv": ("Hesai", "PandarQT64", 64),
    "hesai/nebula_PandarXT16.csv": ("Hesai", "PandarXT-16", 16),
    "hesai/nebula_PandarXT32M.csv": ("Hesai", "PandarXT-32M2X", 32),
    "hesai/nebula_PandarAT128.dat": ("Hesai", "AT128", 128),
    "hesai/LidarView_CalibrationExample.csv": ("Hesai", "PandarXT-32", 32),
    "hesai/AT128P_Angle Correction File.dat": ("Hesai", "AT128", 128),
    "hesai/DriveWorks_correction_p128.dat": ("Hesai", "Pandar128E3X", 128),
    "hesai/General_ROS_correction.csv": ("Hesai", "Pandar40P", 40),
    "robosense/lidar1/angle.csv": ("RoboSense", "RS-16", 16),
    "robosense/lidar2/angle.csv": ("RoboSense", "RS-16", 16),
    "robosense/nebula_Helios5515.csv": ("RoboSense", "RS-Helios", 32),
}

# file -> what the one-line refusal says
CORPUS_REFUSED: dict[str, str] = {
    "ouster/1_13_os1-991937000062-32A02_legacy.json": "64 beam angles but prod_line OS-1-32-A02 has 32 beams",
    "ouster/incorrect_nbeam_angles_legacy_113.json": "64 azimuths for 63 altitudes",
    "ouster/OS-0-128-U1_v2.3.0_1024x10_digest.json": "a JSON file without a beam table",
    "hesai/ET25_Angle_Correction_File_V1.dat": "only the AT128's 1.3 and 1.5 are read",
    "hesai/QT128C2X_Channel_Cofig.csv": "no beam angles",
    "hesai/PandarXT-32_Firetime Correction File.csv": "no beam angles",
    "hesai/QT128C2X_Firetime Correction File.csv": "no beam angles",
    "hesai/AT128E2X_Firetime Correction File.csv": "no beam angles",
    "hesai/Pandar40P_Firetime Correction File.csv": "no beam angles",
    "robosense/lidar1/curves.csv": "not an angle table",
    "robosense/rs_lidar_32/CurveRate.csv": "not a calibrated beam table",
    "robosense/rs_lidar_32/limit.csv": "not elevations in degrees",
    "other/nebula_PandarXT32.param.yaml": "not a calibration format we read",
}


def _load(path: Path, **kw: str) -> SensorPreset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return preset_from_vendor_file(str(path), **kw)


def _wrap(a: float) -> float:
    return (a + 180.0) % 360.0 - 180.0


# ------------------------------------------------------------- independent readers: {laser id: (el, az)}
# el up positive, az counter-clockwise positive (the preset's convention), degrees


def _ouster(path: Path) -> dict[int, tuple[float, float]]:
    d = json.loads(path.read_text())
    bi = d.get("beam_intrinsics", d)
    return {
        i: (e, _wrap(-a))
        for i, (e, a) in enumerate(zip(bi["beam_altitude_angles"], bi["beam_azimuth_angles"], strict=True))
    }


def _velodyne_yaml(path: Path) -> dict[int, tuple[float, float]]:
    text = path.read_text()
    try:
        d = yaml.safe_load(text)
    except yaml.YAMLError:  # PyYAML refuses trailing commas in flow mappings: drop them
        d = yaml.safe_load(text.replace(",}", "}").replace(", }", "}"))
    return {
        int(las["laser_id"]): (
            math.degrees(las["vert_correction"]),
            math.degrees(las.get("rot_correction", 0)),
        )
        for las in d["lasers"]
    }


def _velodyne_xml(path: Path, n: int) -> dict[int, tuple[float, float]]:
    db = ET.parse(path).getroot().find("DB")
    assert db is not None
    out = {}
    for item in db.iterfind("points_/item"):
        px = item.find("px")
        assert px is not None
        lid = int(float(px.findtext("id_", "-1")))
        if lid < n:  # the first n entries (db.xml pads with repeats or zeros to 64)
            out[lid] = (
                float(px.findtext("vertCorrection_", "nan")),
                float(px.findtext("rotCorrection_", "0")),
            )
    return out


def _hesai_csv(path: Path) -> dict[int, tuple[float, float]]:
    rows = list(csv.reader(path.read_text(encoding="utf-8-sig").splitlines()))
    out = {}
    for r in rows:
        try:
            ch, el, az = int(r[0]), float(r[1]), float(r[2])
        except (ValueError, IndexError):
            continue  # the header, a version line or a checksum line
        out[ch] = (el, _wrap(-az))  # laser id = the 1-based channel
    return out


def _at128_dat(path: Path) -> dict[int, tuple[float, float]]:
    b = path.read_bytes()
    if b[:4] == b"\xee\xff\x01\x03":  # v1.3: int16 0.01 deg x resolution, uint16 frame starts and ends
        ch, frames, res = b[4], b[6], b[15]
        az3 = struct.unpack_from(f"<{ch}h", b, 16 + 4 * frames)
        el3 = struct.unpack_from(f"<{ch}h", b, 16 + 4 * frames + 2 * ch)
        return {i + 1: (el3[i] * 0.01 * res, _wrap(az3[i] * 0.01 * res)) for i in range(ch)}
    assert b[:4] == b"\xee\xff\x01\x05"
    ch, mirrors, res = b[4], b[5], b[15]
    off = 16 + 8 * mirrors
    az = struct.unpack_from(f"<{ch}i", b, off)
    el = struct.unpack_from(f"<{ch}i", b, off + 4 * ch)
    unit = res / 25600.0  # 1/256 of the resolution byte's 0.01 deg
    return {i + 1: (el[i] * unit, _wrap(az[i] * unit)) for i in range(ch)}


def _robosense(path: Path) -> dict[int, tuple[float, float]]:
    rows = [r for r in csv.reader(path.read_text().splitlines()) if any(c.strip() for c in r)]
    return {
        i: (float(r[0]), _wrap(-float(r[1])) if len(r) > 1 and r[1].strip() else 0.0)
        for i, r in enumerate(rows)
    }


def _expected(rel: str, n: int) -> dict[int, tuple[float, float]]:
    path = DATA / rel
    if rel.startswith("ouster/"):
        return _ouster(path)
    if path.suffix in (".yaml", ".yml"):
        return _velodyne_yaml(path)
    if path.suffix == ".xml":
        return _velodyne_xml(path, n)
    if path.suffix == ".dat" and path.read_bytes()[:2] == b"\xee\xff":
        return _at128_dat(path)
    if rel.startswith("hesai/"):
        return _hesai_csv(path)
    if "elevation" in path.read_text().splitlines()[0].lower():  # nebula's RoboSense layout: 1-based ids
        return {ch - 1: v for ch, v in _hesai_csv(path).items()}
    return _robosense(path)


@pytest.mark.parametrize("rel", sorted(CORPUS))
def test_real_file_imports_with_its_beam_count_and_angles(rel: str) -> None:
    vendor, model, n = CORPUS[rel]
    p = _load(DATA / rel)
    assert (p.vendor, p.model, p.n_rings) == (vendor, model, n)
    want = _expected(rel, n)
    assert len(want) == n
    assert all(b.laser_id is not None for b in p.beams)
    got = {int(b.laser_id or 0): (b.elevation_deg, b.azimuth_offset_deg) for b in p.beams}
    assert sorted(got) == sorted(want)
    for lid in sorted(want):
        assert got[lid][0] == pytest.approx(want[lid][0], abs=1e-6), f"laser {lid} elevation"
        assert _wrap(got[lid][1] - want[lid][1]) == pytest.approx(0.0, abs=1e-6), f"laser {lid} azimuth"


@pytest.mark.parametrize("rel", sorted(CORPUS_REFUSED))
def test_real_file_without_a_beam_table_is_refused_in_one_line(
    rel: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(DATA / rel)
    with pytest.raises(RtLidarError, match=CORPUS_REFUSED[rel]):
        preset_from_vendor_file(path)
    assert cli_main(["presets", "show", path]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and path in err[0] and CORPUS_REFUSED[rel] in err[0]


def test_db_xml_with_a_stale_enabled_mask_takes_the_models_count(tmp_path: Path) -> None:
    """VeloView's 2014 HDL-32.xml holds 32 calibrated lasers but enables 16: its name (or --model) says
    HDL-32E, so the 32 are taken, with a warning; --model VLP-16 keeps the 16 enabled ones."""
    src = DATA / "velodyne/HDL-32_2014.xml"
    with pytest.warns(UserWarning, match="enabled_ enables 16 lasers but entries 0..31"):
        p = preset_from_vendor_file(str(src))
    assert (p.model, p.n_rings) == ("HDL-32E", 32)
    anon = tmp_path / "db.xml"
    anon.write_bytes(src.read_bytes())
    assert _load(anon, model="HDL-32E").n_rings == 32
    assert _load(anon, model="VLP-16").n_rings == 16


def test_ouster_dome_metadata(tmp_path: Path) -> None:
    """An OSDome's prod_line (``OS-DOME-128``) names the hemispherical model."""
    d = json.loads((DATA / "ouster/OS-0-128-U1_v2.3.0_1024x10.json").read_text())
    d["prod_line"] = "OS-DOME-128-U1"
    d["beam_altitude_angles"] = [90.0 - i * 90.0 / 127 for i in range(128)]
    f = tmp_path / "dome.json"
    f.write_text(json.dumps(d))
    p = _load(f)
    assert (p.model, p.n_rings) == ("OSDome", 128)
    assert p.provenance is not None and p.provenance["range"] == "datasheet OSDome"


ISSUE_NAMES = [
    "HDL-64E", "HDL-32E", "VLP-16", "VLP-32A", "VLP-32C", "Puck Hi-Res", "Puck LITE", "VLS-128",
    "Alpha Prime", "Pandar40P", "Pandar40M", "Pandar64", "PandarQT", "PandarQT128", "PandarXT-16",
    "PandarXT-32", "PandarXT-32M2X", "OT128", "AT128", "JT16", "JT128", "Pandar128E3X", "Pandar90",
    "RS-16", "RS-32", "RS-Bpearl", "RS-Helios", "RS-Ruby",
    "OS0", "OS1", "OS2", "OSDome",
]  # fmt: skip


@pytest.mark.parametrize("name", ISSUE_NAMES)
def test_model_names_match_whatever_the_case_and_punctuation(name: str) -> None:
    canonical = find_model(name, "<test>").name
    for spelling in (
        name.lower(),
        name.upper(),
        name.replace("-", " "),
        name.replace("-", "_"),
        name.replace("-", ""),
    ):
        assert find_model(spelling, "<test>").name == canonical


@pytest.mark.parametrize(
    ("name", "model"), [("XT32", "PandarXT-32"), ("QT128C2X", "PandarQT128"), ("Pandar128E4X", "OT128")]
)
def test_hesai_short_and_protocol_names(name: str, model: str) -> None:
    assert find_model(name, "<test>").name == model


def test_every_model_cites_its_datasheet() -> None:
    from rt_lidar.sensor.vendor.models import MODELS

    for spec in {id(m): m for m in MODELS.values()}.values():
        assert "datasheet" in spec.note, spec.name


def test_flash_lidar_pixel_table_is_refused(tmp_path: Path) -> None:
    """HesaiLidar_Swift_SDK's PandarFT_Correction.csv (FT120, 19440 pixels: too big to vendor; its first
    lines here) has a Column_id: a per-pixel table, refused in one line."""
    f = tmp_path / "PandarFT_Correction.csv"
    f.write_text(
        "Channel,Column_id,Elevation,Azimuth\n120,162,-27.10187776,133.819671\n119,162,-26.65549469,133.6896303\n"
    )
    with pytest.raises(RtLidarError, match="flash lidar"):
        preset_from_vendor_file(str(f))


def _variants(src: str) -> dict[str, bytes]:
    lines = src.splitlines()
    return {
        "utf16.csv": codecs.BOM_UTF16_LE + src.encode("utf-16-le"),  # Excel's "Unicode text"
        "tabs.csv": "\n".join(ln.replace(",", "\t") for ln in lines).encode(),
        "semicolons.csv": "\r\n".join(ln.replace(",", ";") for ln in lines).encode(),
        "quoted.csv": "\n".join(",".join(f'"{c}"' for c in ln.split(",")) for ln in lines).encode(),
        "gbk_comment.csv": ("# 角度校准文件\n" + src).encode("gbk"),
        "spaces.csv": ("\n".join(", ".join(ln.split(",")) + "  " for ln in lines) + "\n\n").encode(),
        "extra_columns.csv": (lines[0] + ",Note\n" + "\n".join(ln + ",x" for ln in lines[1:])).encode(),
        "columns_reordered.csv": (
            "Elevation,Azimuth,Channel\n"
            + "\n".join(",".join(ln.split(",")[i] for i in (1, 2, 0)) for ln in lines[1:])
        ).encode(),
    }


@pytest.mark.parametrize("variant", sorted(_variants("a,b,c\n1,2,3")))
def test_exported_csv_variants_read_the_same(variant: str, tmp_path: Path) -> None:
    """A Hesai table re-saved by a spreadsheet (UTF-16, tabs, semicolons, quotes, a GBK comment, extra or
    reordered columns) and a RoboSense one with tabs or semicolons give the same beams."""
    hesai = DATA / "hesai/Pandar64_Angle Correction File.csv"
    f = tmp_path / "Pandar64" / variant
    f.parent.mkdir()
    f.write_bytes(_variants(hesai.read_text(encoding="utf-8-sig"))[variant])
    assert _load(f).beams == _load(hesai).beams
    if variant in ("tabs.csv", "semicolons.csv"):
        rs = DATA / "robosense/rs_lidar_32/angle.csv"
        g = tmp_path / "rs_lidar_32" / "angle.csv"
        g.parent.mkdir()
        sep = "\t" if variant == "tabs.csv" else ";"
        g.write_text("\n".join(ln.replace(",", sep) for ln in rs.read_text().splitlines()))
        assert _load(g).beams == _load(rs).beams


_OUSTER_PEER = (
    Path(os.environ.get("RT_LIDAR_OUSTER_PEER", DATA.parents[2] / ".venv-ouster")) / "bin" / "python"
)
_SDK_READ = """
import json, sys
from ouster.sdk import core
out = {}
for f in sys.argv[1:]:
    try:
        si = core.SensorInfo(open(f).read())
    except Exception as exc:
        out[f] = str(exc)
        continue
    mode = si.config.lidar_mode if si.config else None
    out[f] = dict(alt=list(si.beam_altitude_angles), az=list(si.beam_azimuth_angles),
                  mode=str(mode) if mode else None,
                  btl=[float(x) for x in si.beam_to_lidar_transform.flatten()])
print(json.dumps(out))
"""


@pytest.mark.skipif(not _OUSTER_PEER.exists(), reason="ouster-sdk peer venv absent (RT_LIDAR_OUSTER_PEER)")
def test_ouster_files_read_as_ouster_sdk_reads_them() -> None:
    """Every vendored Ouster file: ouster-sdk's SensorInfo (its own venv) and our preset hold the same
    angles, lidar mode and beam origin; a file ouster-sdk refuses we refuse too (and an all-zero table,
    which ouster-sdk takes, we refuse as uncalibrated)."""
    files = sorted(str(f) for f in (DATA / "ouster").glob("*.json"))
    run = subprocess.run(
        [str(_OUSTER_PEER), "-c", _SDK_READ, *files], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    sdk = json.loads(run.stdout)
    checked = 0
    for f in files:
        ref = sdk[f]
        if "beam_intrinsics" in f:  # beam intrinsics alone: not a metadata file for ouster-sdk
            continue
        if isinstance(ref, str):
            if f.endswith(
                "_config_param.json"
            ):  # ouster_example's 2021 SDK read it; today's wants config_params
                assert "config_params" in ref and _load(Path(f)).n_rings == 64
                continue
            with pytest.raises(RtLidarError):
                _load(Path(f))
            continue
        if ref["alt"] and not any(ref["alt"]):
            with pytest.raises(RtLidarError, match="all 128 elevations are 0"):
                _load(Path(f))
            continue
        p = _load(Path(f))
        assert list(p.elevations_deg) == pytest.approx(ref["alt"], abs=1e-9), f
        assert [_wrap(-a) for a in p.azimuth_offsets_deg] == pytest.approx(
            [_wrap(a) for a in ref["az"]], abs=1e-9
        ), f
        if ref["mode"]:
            cols, hz = ref["mode"].split("x")
            assert (p.scan.columns_per_rev, p.scan.rotation_hz) == (int(cols), float(hz)), f
        b = p.beams[0]
        assert b.origin_radial_m is not None and b.origin_up_m is not None, f
        assert (b.origin_radial_m * 1000.0, b.origin_up_m * 1000.0) == pytest.approx(
            (ref["btl"][3], ref["btl"][11]), abs=1e-6
        ), f
        checked += 1
    assert checked >= 18


@pytest.mark.parametrize(
    "rel", sorted(r for r in CORPUS if r.startswith("velodyne/") and r.endswith((".yaml", ".yml")))
)
def test_velodyne_yaml_reads_as_velodyne_decoder_reads_it(rel: str) -> None:
    """velodyne_decoder parses the same YAML (its float32 angles: within 1e-5 deg) to the same lasers."""
    vd = pytest.importorskip("velodyne_decoder")
    theirs = yaml.safe_load(vd.Calibration.read(str(DATA / rel)).to_string())["lasers"]
    p = _load(DATA / rel)
    ours = {int(b.laser_id or 0): b for b in p.beams}
    assert len(theirs) == p.n_rings
    for las in theirs:
        b = ours[int(las["laser_id"])]
        assert b.elevation_deg == pytest.approx(math.degrees(las["vert_correction"]), abs=1e-5)
        az = math.degrees(las.get("rot_correction", 0.0))
        assert _wrap(b.azimuth_offset_deg - az) == pytest.approx(0.0, abs=1e-5)


def test_robosense_table_in_hesai_layout_by_name_or_model(tmp_path: Path) -> None:
    """nebula's RoboSense tables use Hesai's 'Laser id,Elevation,Azimuth' layout: the file's name (or
    --model) makes it a RoboSense preset; without either it stays a Hesai table."""
    src = DATA / "robosense/nebula_Helios5515.csv"
    anon = tmp_path / "calibration.csv"
    anon.write_bytes(src.read_bytes())
    assert _load(anon).vendor == "Hesai"
    p = _load(anon, model="RS-Helios")
    assert (p.vendor, p.model) == ("RoboSense", "RS-Helios")
    assert p.beams == _load(src).beams


def test_at128_dat_with_bytes_before_its_delimiter(tmp_path: Path) -> None:
    """nebula searches an AT128 .dat for its EE FF delimiter: a few bytes before it change nothing."""
    src = DATA / "hesai/AT128E2X_Angle Correction File.dat"
    f = tmp_path / "AT128.dat"
    f.write_bytes(b"\x00\x01\x02" + src.read_bytes())
    assert _load(f).beams == _load(src).beams


def test_model_option_against_what_the_file_says_is_said() -> None:
    """--model wins over the file's prod_line, with a warning naming both."""
    f = DATA / "ouster/OS-0-32-U1_v2.2.0_1024x10.json"
    with pytest.warns(UserWarning, match="the file says OS0 .prod_line OS-0-32-U1. but --model says OS2"):
        p = preset_from_vendor_file(str(f), model="OS2")
    assert p.model == "OS2"
