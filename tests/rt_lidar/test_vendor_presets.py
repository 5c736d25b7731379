"""Real vendor calibration files (tests/data/vendor) as presets: every format read, the angles the file
holds (checked against other parsers and other formats of the same table), models, lidar modes,
firetimes, provenance, the refusals, ``presets import`` / ``show`` and ``--preset FILE`` in a run."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import shutil
import warnings
from importlib import resources
from pathlib import Path

import pytest
import yaml  # PyYAML: a second, independent YAML parser to check ours against

from rt_lidar.cli.main import main as cli_main
from rt_lidar.errors import PresetError, RtLidarError
from rt_lidar.rig import load_rig
from rt_lidar.sensor.presets import SensorPreset, load_preset, preset_from_dict
from rt_lidar.sensor.vendor import preset_from_vendor_file
from rt_lidar.sensor.vendor.models import find_model

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "vendor"
OUSTER, VELO, HESAI, RS = DATA / "ouster", DATA / "velodyne", DATA / "hesai", DATA / "robosense"


def _prov(p: SensorPreset) -> dict[str, str]:
    assert p.provenance is not None
    return p.provenance


def _load(path: Path, **kw: str) -> SensorPreset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return preset_from_vendor_file(str(path), **kw)


# file -> (vendor, model, beams, columns a turn or None)
READABLE = {
    "ouster/OS-0-32-U1_v2.2.0_1024x10.json": ("Ouster", "OS0", 32, 1024),
    "ouster/OS-2-128-U1_v2.3.0_1024x10.json": ("Ouster", "OS2", 128, 1024),
    "ouster/3_0_1_os-122246000293-128.json": ("Ouster", "OS1", 128, 1024),
    "ouster/1_14_6cccd_os-882002000138-32U0_legacy.json": ("Ouster", "OS0", 32, 1024),
    "ouster/OS-1-64-AH_v2.5.2_same_ports_nonlegacy.2.json": ("Ouster", "OS1", 64, 1024),
    "ouster/OS-0-128_v2.3.0_512x10_windowed_frame1_0.json": ("Ouster", "OS0", 128, 512),
    "ouster/ouster-studio-reduced-config-v1.json": ("Ouster", "OS1", 64, 2048),
    "velodyne/32db.yaml": ("Velodyne", "HDL-32E", 32, None),
    "velodyne/64e_s2.1-sztaki.yaml": ("Velodyne", "HDL-64E", 64, None),
    "velodyne/VLP16db.yaml": ("Velodyne", "VLP-16", 16, None),
    "velodyne/issue_84_float_intensities.yaml": ("Velodyne", "HDL-64E", 64, None),
    "velodyne/nebula_VLS128.yaml": ("Velodyne", "VLS-128", 128, None),
    "velodyne/VLP-32A.yml": ("Velodyne", "VLP-32A", 32, None),
    "velodyne/Puck Hi-Res.yml": ("Velodyne", "Puck Hi-Res", 16, None),
    "velodyne/Alpha Prime.yml": ("Velodyne", "VLS-128", 128, None),
    "velodyne/VLP-16.xml": ("Velodyne", "VLP-16", 16, None),
    "velodyne/HDL-32.xml": ("Velodyne", "HDL-32E", 32, None),
    "hesai/Pandar64_Angle Correction File.csv": ("Hesai", "Pandar64", 64, None),
    "hesai/Pandar40P_Angle Correction File.csv": ("Hesai", "Pandar40P", 40, None),
    "hesai/PandarQT_Angle Correction File.csv": ("Hesai", "PandarQT64", 64, None),
    "hesai/QT128C2X_Angle Correction File.csv": ("Hesai", "PandarQT128", 128, None),
    "hesai/PandarXT-16_Angle Correction File.csv": ("Hesai", "PandarXT-16", 16, None),
    "hesai/nebula_PandarXT32.csv": ("Hesai", "PandarXT-32", 32, None),
    "hesai/OT128_Angle Correction File.csv": ("Hesai", "OT128", 128, None),
    "hesai/JT16_Angle Correction File.csv": ("Hesai", "JT16", 16, None),
    "hesai/JT128_Angle Correction File.csv": ("Hesai", "JT128", 128, None),
    "hesai/nebula_PandarAT128.csv": ("Hesai", "AT128", 128, None),
    "hesai/AT128E2X_Angle Correction File.dat": ("Hesai", "AT128", 128, None),
    "robosense/rs_lidar_16/angle.csv": ("RoboSense", "RS-16", 16, None),
    "robosense/rs_lidar_32/angle.csv": ("RoboSense", "RS-32", 32, None),
    "robosense/rs_bpearl/angle.csv": ("RoboSense", "RS-Bpearl", 32, None),
    "robosense/RobosenseHelios.csv": ("RoboSense", "RS-Helios", 32, None),
}


@pytest.mark.parametrize("rel", sorted(READABLE))
def test_every_real_file_is_a_validated_preset(rel: str) -> None:
    vendor, model, n, columns = READABLE[rel]
    p = _load(DATA / rel)
    assert (p.vendor, p.model, p.n_rings) == (vendor, model, n)
    assert _prov(p)["beams.elevation_deg"].startswith("file: ")
    assert _prov(p)["range"] == f"datasheet {model}"
    if columns is not None:
        assert p.scan.columns_per_rev == columns
    # it is a preset like any other: its dict validates back to the same object
    from rt_lidar.sensor.presets import preset_to_dict

    assert preset_from_dict(preset_to_dict(p), "<again>") == p


def test_all_files_in_the_folder_are_covered() -> None:
    refused = set(REFUSED)
    files = {str(f.relative_to(DATA)) for f in DATA.rglob("*") if f.is_file() and f.name != "README.md"}
    derived_or_companion = {
        "ouster/3_0_1_os-122246000293-128_beam_intrinsics.json",
        "hesai/Pandar64_Firetime Correction File.csv",
        "hesai/OT128_Firetime Correction File.csv",
    }
    spec = importlib.util.spec_from_file_location(
        "vendor_corpus", Path(__file__).with_name("test_vendor_corpus.py")
    )
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)  # the more real files that test_vendor_corpus.py checks
    more = set(corpus.CORPUS) | set(corpus.CORPUS_REFUSED)
    assert files - set(READABLE) - refused - derived_or_companion - more == set()


# ------------------------------------------------------------------ angles as the files hold them


@pytest.mark.parametrize("rel", [r for r in READABLE if r.startswith("ouster/")])
def test_ouster_angles_are_the_files(rel: str) -> None:
    d = json.loads((DATA / rel).read_text())
    bi = d.get("beam_intrinsics", d)
    p = _load(DATA / rel)
    assert list(p.elevations_deg) == bi["beam_altitude_angles"]
    # clockwise in the file, counter-clockwise in the preset
    assert [-a for a in p.azimuth_offsets_deg] == pytest.approx(bi["beam_azimuth_angles"], abs=1e-9)
    assert set(p.firing_offsets_us) == {0.0}  # a column fires together


@pytest.mark.parametrize(
    "rel", [r for r in READABLE if r.startswith("velodyne/") and r.endswith(("yaml", "yml"))]
)
def test_velodyne_yaml_matches_an_independent_parser(rel: str) -> None:
    lasers = {int(las["laser_id"]): las for las in yaml.safe_load((DATA / rel).read_text())["lasers"]}
    p = _load(DATA / rel)
    assert p.n_rings == len(lasers)
    for b in p.beams:
        las = lasers[int(b.laser_id or 0)]
        assert b.elevation_deg == pytest.approx(math.degrees(las["vert_correction"]), abs=1e-9)
        assert b.azimuth_offset_deg == pytest.approx(math.degrees(las.get("rot_correction", 0.0)), abs=1e-9)
        assert b.dist_correction_m == pytest.approx(las.get("dist_correction", 0.0))
        assert b.vert_offset_correction_m == pytest.approx(las.get("vert_offset_correction", 0.0))
    assert list(p.elevations_deg) == sorted(p.elevations_deg)  # ROS rings


DECODER_CALIBRATIONS = resources.files("velodyne_decoder") / "calibrations"


@pytest.mark.parametrize(("xml", "yml"), [("VLP-16.xml", "VLP-16.yml"), ("HDL-32.xml", "HDL-32E.yml")])
def test_db_xml_equals_the_same_table_converted_to_yaml(xml: str, yml: str, tmp_path: Path) -> None:
    """VeloView's db.xml (degrees, cm, enabled_ mask) and velodyne_decoder's YAML made from it agree."""
    converted = tmp_path / yml
    converted.write_bytes((DECODER_CALIBRATIONS / yml).read_bytes())
    a, b = _load(VELO / xml), _load(converted)
    assert a.n_rings == b.n_rings
    for x, y in zip(a.beams, b.beams, strict=True):
        assert x.laser_id == y.laser_id
        assert x.elevation_deg == pytest.approx(y.elevation_deg, abs=1e-4)
        assert x.azimuth_offset_deg == pytest.approx(y.azimuth_offset_deg, abs=1e-4)


def test_db_xml_misspelt_tag_and_centimetres(tmp_path: Path) -> None:
    """The VLS-128 db.xml spells horizOffsetCorection_ (all 0 in this file): with its doubled id fixed and
    one offset set to 2.5 cm, it reads 0.025 m from the misspelt tag."""
    text = (VELO / "VLS-128.xml").read_text()
    first = text.index("<id_>68</id_>")
    second = text.index("<id_>68</id_>", first + 1)
    text = text[:second] + "<id_>38</id_>" + text[second + len("<id_>68</id_>") :]
    tag = "<horizOffsetCorection_>0</horizOffsetCorection_>"
    assert text.count(tag) == 128
    fixed = tmp_path / "VLS-128.xml"
    fixed.write_text(text.replace(tag, "<horizOffsetCorection_>2.5</horizOffsetCorection_>", 1))
    p = _load(fixed)
    assert p.model == "VLS-128" and p.n_rings == 128
    by_id = {b.laser_id: b.horiz_offset_correction_m for b in p.beams}
    assert by_id[0] == pytest.approx(0.025) and sum(v != 0.0 for v in by_id.values()) == 1


def test_hesai_csv_layouts_bom_crlf_checksum_and_wrapped_azimuths() -> None:
    jt = HESAI / "JT128_Angle Correction File.csv"
    raw = jt.read_bytes()
    assert b"\r\n" in raw
    last = raw.decode().strip().splitlines()[-1]
    assert len(last.split(",")[0]) == 64  # the trailing SHA-256 line
    p = _load(jt)
    assert p.n_rings == 128  # the checksum line is no channel
    rows = [ln.split(",") for ln in raw.decode().splitlines()[1:129]]
    for b, r in zip(p.beams, rows, strict=True):
        assert b.elevation_deg == float(r[1])
        assert (b.azimuth_offset_deg + float(r[2])) % 360.0 == pytest.approx(
            0.0, abs=1e-9
        )  # flipped, wrapped
        assert -180.0 <= b.azimuth_offset_deg < 180.0
    assert (HESAI / "PandarQT_Angle Correction File.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    qt = _load(HESAI / "PandarQT_Angle Correction File.csv")
    assert qt.beams[0].laser_id == 1 and qt.elevations_deg[0] == -52.121


def test_at128_dat_agrees_with_the_csv() -> None:
    dat, csv_ = _load(HESAI / "AT128E2X_Angle Correction File.dat"), _load(HESAI / "nebula_PandarAT128.csv")
    assert list(dat.azimuth_offsets_deg) == pytest.approx(list(csv_.azimuth_offsets_deg), abs=1e-6)
    assert max(abs(dat.elevations_deg - csv_.elevations_deg)) < 0.1  # per-unit
    data = (HESAI / "AT128E2X_Angle Correction File.dat").read_bytes()
    assert hashlib.sha256(data[:-32]).digest() == data[-32:]  # the file's own SHA-256, as we check it
    assert "mirror frames" in _prov(dat)["scan.mirror_fields_deg"] and "not_used" not in _prov(dat)


def test_robosense_one_and_two_columns() -> None:
    """Laser id = the file's row; ring = rs_driver's user channel (rank by elevation); its firing table."""
    rs16 = _load(RS / "rs_lidar_16" / "angle.csv")
    values = [float(v) for v in (RS / "rs_lidar_16" / "angle.csv").read_text().split()]
    assert {b.laser_id: b.elevation_deg for b in rs16.beams} == dict(enumerate(values))
    assert list(rs16.elevations_deg) == sorted(values)
    assert [b.firing_offset_us for b in sorted(rs16.beams, key=lambda b: b.laser_id or 0)][:3] == [
        0.0,
        2.8,
        5.6,
    ]
    rs32 = _load(RS / "rs_lidar_32" / "angle.csv")
    rows = [
        [float(v) for v in ln.split(",")]
        for ln in (RS / "rs_lidar_32" / "angle.csv").read_text().splitlines()
    ]
    by_id = {b.laser_id: b for b in rs32.beams}
    for i, (el, az) in enumerate(rows):
        assert (by_id[i].elevation_deg, -by_id[i].azimuth_offset_deg) == pytest.approx((el, az))
    assert list(rs32.elevations_deg) == sorted(rs32.elevations_deg)
    assert by_id[16].firing_offset_us == 1.44 and by_id[15].firing_offset_us == 44.64


# ------------------------------------------------------------------ models, modes, firetimes


@pytest.mark.parametrize("spelling", ["Puck Hi-Res", "puck hi res", "PUCK_HI-RES", "puckhires"])
def test_model_names_ignore_case_and_punctuation(spelling: str) -> None:
    assert find_model(spelling, "x").name == "Puck Hi-Res"
    p = _load(VELO / "VLP16db.yaml", model=spelling)
    assert p.model == "Puck Hi-Res" and _prov(p)["model"] == f"--model {spelling}"


def test_model_guess_warns_and_model_option_settles_it() -> None:
    with pytest.warns(UserWarning, match="does not name its model: took HDL-32E.*give --model"):
        preset_from_vendor_file(str(VELO / "32db.yaml"))
    p = _load(VELO / "32db.yaml", model="VLP-32A")
    assert p.model == "VLP-32A" and p.packet_format == "velodyne-vlp32c"
    # the firing schedule is the model's: a VLP-32 fires lasers in pairs every 2.304 us
    by_id = {b.laser_id: b.firing_offset_us for b in p.beams}
    assert by_id[0] == by_id[1] == 0.0 and by_id[2] == pytest.approx(2.304)


def test_ouster_lidar_mode_from_the_file_or_the_option() -> None:
    intrinsics = OUSTER / "3_0_1_os-122246000293-128_beam_intrinsics.json"
    with pytest.raises(PresetError, match=r"lidar_mode.*give --lidar-mode"):
        preset_from_vendor_file(str(intrinsics))
    p = _load(intrinsics, lidar_mode="2048x10")
    assert (p.scan.columns_per_rev, p.scan.rotation_hz) == (2048, 10.0)
    q = _load(OUSTER / "3_0_1_os-122246000293-128.json", lidar_mode="512x20")
    assert (q.scan.columns_per_rev, q.scan.rotation_hz) == (512, 20.0)
    with pytest.raises(PresetError, match="'1000x10': expected one of"):
        preset_from_vendor_file(str(intrinsics), lidar_mode="1000x10")
    # the reference string carries the options (config.json, rigs, sweeps)
    r = load_preset(f"{intrinsics}#lidar_mode=1024x20")
    assert (r.scan.columns_per_rev, r.scan.rotation_hz) == (1024, 20.0)


def test_hesai_firetime_file_gives_the_firing_offsets() -> None:
    angles, ft = HESAI / "Pandar64_Angle Correction File.csv", HESAI / "Pandar64_Firetime Correction File.csv"
    rows = [ln.split(",") for ln in ft.read_text(encoding="utf-8-sig").splitlines()[1:] if ln.strip()]
    times = {int(r[0]): float(r[1]) for r in rows}
    p = _load(angles, firetime=str(ft))
    lo = min(times.values())
    for b in p.beams:
        assert b.firing_offset_us == pytest.approx(times[int(b.laser_id or 0)] - lo, abs=1e-6)
    assert _prov(p)["beams.firing_offset_us"].startswith("file: firetime")
    # the OT128's state table gives per-azimuth-state offsets (tests/rt_lidar/test_ot128_firing_states.py)
    ot = preset_from_vendor_file(
        str(HESAI / "OT128_Angle Correction File.csv"),
        firetime=str(HESAI / "OT128_Firetime Correction File.csv"),
    )
    assert ot.firing_state_offsets_us is not None and ot.firing_state_offsets_us.shape == (2, 128)


# ------------------------------------------------------------------ refusals

REFUSED = {
    "hesai/PandarXT-16_Firetime Correction File.csv": "firetime / channel-config file holds firing times",
    "hesai/ATX_Angle Correction File_V42.dat": "Hesai .dat version 4.2",
    "other/MID360_config.json": "Livox driver configuration",
    "robosense/rs_lidar_16/ChannelNum.csv": "temperature-indexed distance offsets",
    "velodyne/VLS-128.xml": "laser id 68 appears twice and 38 never",
    "ouster/1_12_os1-991937000062-16A0_legacy.json": "64 beam angles but prod_line OS-1-16-A0 has 16 beams",
    "ouster/malformed_complete_but_all_zeros_legacy.json": "all 128 elevations are 0 deg",
}


@pytest.mark.parametrize("rel", sorted(REFUSED))
def test_files_without_a_usable_beam_table_are_refused_in_one_line(
    rel: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(DATA / rel)
    with pytest.raises(RtLidarError, match=REFUSED[rel]):
        preset_from_vendor_file(path)
    assert cli_main(["presets", "show", path]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and path in err[0] and REFUSED[rel] in err[0]


def test_inconsistent_and_unknown_inputs(tmp_path: Path) -> None:
    with pytest.raises(PresetError, match="16 beams, but a HDL-32E has 32"):
        preset_from_vendor_file(str(VELO / "VLP16db.yaml"), model="HDL-32E")
    with pytest.raises(PresetError, match="unknown Velodyne model 'VLP-99'"):
        preset_from_vendor_file(str(VELO / "VLP16db.yaml"), model="VLP-99")
    blob = tmp_path / "unknown.bin"
    blob.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(PresetError, match="binary file of unknown format"):
        preset_from_vendor_file(str(blob))
    bad = tmp_path / "bad.csv"
    bad.write_text("Channel,Elevation,Azimuth\n1,95.0,0\n2,1.0,0\n")
    with pytest.raises(PresetError, match=r"elevation 95 deg is outside -90..90"):
        preset_from_vendor_file(str(bad))
    far = tmp_path / "far.csv"
    far.write_text("Channel,Elevation,Azimuth\n1,5.0,400\n2,1.0,0\n")
    with pytest.raises(PresetError, match=r"azimuth 400 deg is outside -360..360"):
        preset_from_vendor_file(str(far))
    nolasers = tmp_path / "params.yaml"
    nolasers.write_text("lasers: []\n")
    with pytest.raises(PresetError, match="non-empty list of lasers"):
        preset_from_vendor_file(str(nolasers))
    with pytest.raises(PresetError, match="no such calibration file"):
        load_preset(str(tmp_path / "missing.yaml"))


def test_variants_seen_in_the_wild(tmp_path: Path) -> None:
    """Derived from the real files: a VLP-16 db.xml with its repeated entries enabled too, a Hesai CSV
    with a version line before its header, an Ouster prod_line we do not know."""
    text = (VELO / "VLP-16.xml").read_text()
    start, end = text.index("<enabled_>"), text.index("</enabled_>")
    enabled = text[start:end].replace("<item>0</item>", "<item>1</item>", 16)  # entries 16-31: repeats
    all_on = tmp_path / "VLP-16.xml"
    all_on.write_text(text[:start] + enabled + text[end:])
    with pytest.warns(UserWarning, match="entries 16..31 repeat lasers 0..15: kept 16"):
        p = preset_from_vendor_file(str(all_on))
    assert p.n_rings == 16 and p.beams == _load(VELO / "VLP-16.xml").beams

    csv_ = tmp_path / "Pandar64_Angle Correction File.csv"
    csv_.write_text("EEFF,1,4\n" + (HESAI / "Pandar64_Angle Correction File.csv").read_text())
    q = _load(csv_)
    assert q.beams == _load(HESAI / "Pandar64_Angle Correction File.csv").beams
    assert "before the header" in _prov(q)["not_used"]
    bare = tmp_path / "correction.csv"  # Hesai's SDKs also take an EEFF line, one more, then bare rows
    rows = (HESAI / "Pandar64_Angle Correction File.csv").read_text().splitlines()[1:]
    bare.write_text("EEFF,1,4\n64,1\n" + "\n".join(rows) + "\n")
    assert _load(bare, model="Pandar64").beams == q.beams

    d = json.loads((OUSTER / "3_0_1_os-122246000293-128.json").read_text())
    d["sensor_info"]["prod_line"] = "OS-X-128"  # (OS-DOME-128 is known: test_vendor_corpus)
    dome = tmp_path / "dome.json"
    dome.write_text(json.dumps(d))
    with pytest.warns(UserWarning, match="prod_line 'OS-X-128' is not one we know"):
        r = preset_from_vendor_file(str(dome))
    assert r.n_rings == 128


def test_repeated_yaml_keys_keep_the_last(tmp_path: Path) -> None:
    """Some real files repeat a key; the drivers' parsers keep the last value, and so do we."""
    text = (VELO / "64e_s2.1-sztaki.yaml").read_text()
    marker = "  vert_correction: "
    i = text.index(marker)
    doubled = tmp_path / "doubled.yaml"
    doubled.write_text(text[:i] + "  vert_correction: 0.5\n" + text[i:])  # an earlier, overridden value
    a, b = _load(VELO / "64e_s2.1-sztaki.yaml"), _load(doubled)
    assert a.beams == b.beams


def test_import_tool_reads_block_and_multiline_yaml() -> None:
    spec = importlib.util.spec_from_file_location(
        "import_calibrations", ROOT / "tools" / "import_calibrations.py"
    )
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert len(tool.parse_velodyne_yaml((VELO / "64e_s2.1-sztaki.yaml").read_text())) == 64  # block
    assert len(tool.parse_velodyne_yaml((VELO / "nebula_VLS128.yaml").read_text())) == 128  # multi-line
    assert len(tool.parse_velodyne_yaml((VELO / "32db.yaml").read_text())) == 32  # flow


# ------------------------------------------------------------------ CLI, TOML, runs, rigs


@pytest.mark.parametrize(
    ("rel", "extra"),
    [
        ("hesai/JT16_Angle Correction File.csv", []),
        ("ouster/3_0_1_os-122246000293-128_beam_intrinsics.json", ["--lidar-mode", "1024x20"]),
        ("velodyne/VLP16db.yaml", ["--model", "Puck LITE"]),
        ("hesai/AT128E2X_Angle Correction File.dat", []),
    ],
)
def test_presets_import_writes_a_toml_that_loads_back_the_same(
    rel: str, extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine.toml"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli_main(["presets", "import", str(DATA / rel), *extra, "--out", str(out)]) == 0
        direct = load_preset(
            str(DATA / rel), model=_opt(extra, "--model"), lidar_mode=_opt(extra, "--lidar-mode")
        )
    assert load_preset(out) == direct
    capsys.readouterr()
    assert cli_main(["presets", "show", str(out), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [b["elevation_deg"] for b in shown["beams"]] == list(direct.elevations_deg)
    assert shown["provenance"]["beams.elevation_deg"].startswith("file: ")


def _opt(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def test_model_option_on_a_preset_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["presets", "show", "VLP-16", "--model", "VLP-32A"]) == 2
    assert "--model: applies to a vendor calibration file" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["--in-process", "bridged"])
def test_demo_runs_a_vendor_file_and_records_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """In-process, and bridged: the embedded server resolves the same file and options."""
    src = VELO / "VLP16db.yaml"
    out = tmp_path / "run"
    args = ["demo", "--preset", str(src), "--model", "Puck LITE", "--frames", "1", "--quiet"]
    args += ["--in-process"] if where == "--in-process" else []
    assert cli_main([*args, "--out", str(out)]) == 0
    record = json.loads((out / "config.json").read_text())
    assert record["config"]["preset"] == f"{src}#model=Puck LITE"
    assert record["preset"]["model"] == "Puck LITE" and record["preset"]["provenance"]["range"]
    capsys.readouterr()


def test_rig_file_names_a_vendor_file_beside_it(tmp_path: Path) -> None:
    shutil.copy(HESAI / "PandarXT-16_Angle Correction File.csv", tmp_path / "xt16.csv")
    rig = tmp_path / "rig.toml"
    rig.write_text(
        '[[sensor]]\nname = "roof"\npreset = "xt16.csv#model=PandarXT-16"\n'
        "mount = { xyz = [0.0, 0.0, 1.9], rpy_deg = [0.0, 0.0, 0.0] }\n"
    )
    r = load_rig(rig)
    assert r.sensors[0].preset.model == "PandarXT-16" and r.sensors[0].preset.n_rings == 16
