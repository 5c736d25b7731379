"""Near-IR (ambient) in every Ouster profile, and the low-bandwidth dual profiles (RNG15_RFL8_NIR8_DUAL
and FUSA_RNG15_RFL8_NIR8_DUAL, FUSA packet header): ouster-sdk 1.0 (its own venv) decodes our pcap to
what we wrote, near-IR included, on scans of the street scene in full sun."""

from __future__ import annotations

import functools
import json
import warnings

import numpy as np
import pytest
from conftest import with_second_returns
from peers import needs_peer
from test_ouster_profiles import _decode, _write

from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.ouster import NIR_COUNTS_PER_W, OusterPacketizer
from rt_lidar.sinks.pcap import read_pcap_udp
from rt_lidar.sinks.pcd import read_pcd, with_extras, write_pcd

pytestmark = needs_peer("ouster")


@functools.lru_cache(maxsize=2)
def _sunny(preset: str, n: int) -> tuple[Scan, ...]:
    built = build_pipeline(preset, "street", seed=0, physics=PhysicsConfig(sun_illuminance_lux=100_000.0))
    return tuple(built.pipeline.scans(n))


def _dual(scan: Scan) -> Scan:
    """with_second_returns, keeping each point's ambient power (a second return shares its pulse's)."""
    twin = with_second_returns(scan)
    amb = scan.extras["ambient_w"]
    # with_second_returns sorts by (t, ring, return_id): rebuild the ambient of every row by its pulse
    key = {(int(t), int(r)): a for t, r, a in zip(scan.points["t"], scan.points["ring"], amb, strict=True)}
    twin.extras = {
        "ambient_w": np.array(
            [key[(int(t), int(r))] for t, r in zip(twin.points["t"], twin.points["ring"], strict=True)],
            np.float32,
        )
    }
    return twin


def test_ambient_power_rides_with_the_points_and_into_pcd(tmp_path):
    (scan,) = _sunny("OS1-64", 1)
    amb = scan.extras["ambient_w"]
    assert amb.dtype == np.float32 and amb.shape == scan.points.shape
    # full summer sun: nanowatts on the detector from the lit road; less from what stands up (walls,
    # cars: dark paints and glass send less); surfaces turned from the sun, about a third, send none
    road = scan.points["z"] < -1.0
    assert 1e-9 < float(np.median(amb[road])) < 1e-8 and (amb > 0).mean() > 0.5
    assert 1e-10 < float(np.median(amb[~road])) < float(np.median(amb[road]))
    path = write_pcd(tmp_path / "a.pcd", scan.points, scan.extras)
    back = read_pcd(path, with_extras(scan.points[:0], {"ambient_w": amb[:0]}).dtype)
    np.testing.assert_array_equal(back["ambient_w"], amb)
    # at night there is no ambient: no field at all (as before)
    night = build_pipeline("OS1-64", "street", seed=0).pipeline.scans(1)[0]
    assert "ambient_w" not in night.extras


PROFILES = {
    # profile: (near-IR quantum in counts, dual)
    "LEGACY": (1, False),
    "RNG19_RFL8_SIG16_NIR16": (1, False),
    "RNG15_RFL8_NIR8": (16, False),
    "RNG19_RFL8_SIG16_NIR16_DUAL": (1, True),
    "RNG15_RFL8_NIR8_DUAL": (16, True),
    "FUSA_RNG15_RFL8_NIR8_DUAL": (16, True),
}


@pytest.mark.parametrize("profile", list(PROFILES))
def test_ouster_sdk_reads_near_ir_in_every_profile(tmp_path, profile):
    quantum, dual = PROFILES[profile]
    scans = list(_sunny("OS1-64", 2))
    if dual:
        scans = [_dual(s) for s in scans]
    pcap = _write(tmp_path, "OS1-64", scans, {"profile": profile})
    meta_path = tmp_path / "os.json"
    meta = json.loads(meta_path.read_text())
    dec = _decode(tmp_path, pcap, meta_path, meta_path)
    assert int(dec["n"]) == 2, "ouster-sdk read no frame"
    pz = OusterPacketizer(load_preset("OS1-64"), meta)
    recs = [r for r in read_pcap_udp(pcap) if r.dst_port == 7502]
    assert {len(r.payload) for r in recs} == {pz.format.packet_bytes}
    if profile.startswith("FUSA"):
        assert meta["lidar_data_format"]["header_type"] == "FUSA"
        head = recs[len(pz.packets)].payload  # second frame: frame id 1 in the u32 at byte 4
        assert head[0] == 1 and int.from_bytes(head[4:8], "little") == 1
        assert int.from_bytes(head[1:4], "little") == int(dec["ids"][0])
        assert int.from_bytes(head[11:16], "little") == int(dec["ids"][1])
    for k, scan in enumerate(scans):
        img = pz.image(scan)
        want_nir = np.minimum((img["nir"] + 8) >> 4, 255) << 4 if quantum > 1 else img["nir"]
        np.testing.assert_array_equal(dec["NEAR_IR"][k], want_nir)
        rng = (np.minimum((img["range"] + 4) >> 3, (1 << 15) - 1) << 3) if quantum > 1 else img["range"]
        np.testing.assert_array_equal(dec["RANGE"][k], rng)
        # firmware 2.0's LEGACY reflectivity is 16 bits of signal x range^2 (issue 40); ouster-sdk 1.0 reads
        # its low byte, as it does from the real firmware 2.0 frame of ../shared/reference/real
        want_refl = img["reflectivity"] & 0xFF if pz.signal_r2 else img["reflectivity"]
        np.testing.assert_array_equal(dec["REFLECTIVITY"][k], want_refl)
        if dual:
            r2 = img["range2"]
            r2 = (np.minimum((r2 + 4) >> 3, (1 << 15) - 1) << 3) if quantum > 1 else r2
            np.testing.assert_array_equal(dec["RANGE2"][k], r2)
            np.testing.assert_array_equal(dec["REFLECTIVITY2"][k], img["reflectivity2"])
            assert (dec["RANGE2"][k] > 0).sum() > 0.2 * (dec["RANGE"][k] > 0).sum()
        # near-IR is the sunlight the pixel's surface sends: sunlit pixels (most) have some, the lit road
        # (a third of the pixels, the brightest) hundreds to thousands of counts
        lit = dec["NEAR_IR"][k][dec["RANGE"][k] > 0]
        q50, q75 = np.percentile(lit, [50, 75])
        assert (lit > 0).mean() > 0.5 and 30 < q50 < q75 and 300 < q75 < 3000, (q50, q75)


def test_near_ir_counts_follow_the_ambient_power():
    (scan,) = _sunny("OS1-64", 1)
    pz = OusterPacketizer(load_preset("OS1-64"), json.loads(json.dumps(_meta())))
    img = pz.image(scan)
    got = img["nir"][img["range"] > 0]
    amb = scan.extras["ambient_w"]
    assert abs(np.median(got) - np.median(amb) * NIR_COUNTS_PER_W) < 0.1 * np.median(got)


def _meta() -> dict:
    from rt_lidar.sinks.ouster import metadata_for

    return metadata_for(load_preset("OS1-64"), profile="RNG19")


def test_ouster_ros_ambient_field_carries_the_near_ir():
    """The PointCloud2 of an Ouster preset (ros2 and rosbag sinks) fills ouster-ros's ``ambient``."""
    from rt_lidar.sinks.ouster_meta import nir_counts
    from rt_lidar.sinks.rosbag import cloud_bytes, cloud_layout

    (scan,) = _sunny("OS1-64", 1)
    layout = cloud_layout(load_preset("OS1-64"))
    cloud = cloud_bytes(scan.points, layout, scan.extras["ambient_w"]).view(layout)
    np.testing.assert_array_equal(cloud["ambient"], nir_counts(scan.extras["ambient_w"]))
    assert np.median(cloud["ambient"][cloud["ambient"] > 0]) > 300
    assert not cloud_bytes(scan.points, layout).view(layout)["ambient"].any()  # no sun: 0


def test_pixel_shift_by_row_against_the_beam_azimuths_warns_when_they_disagree():
    """Firmware 1.14's files wrote shifts that do not follow their azimuths; newer ones do (up to a
    constant, which only turns the destaggered image)."""
    from rt_lidar.sinks.ouster_meta import complete_metadata, shift_spread

    preset = load_preset("OS1-64")
    az = [3.1, 0.9, -1.2, -3.3] * 16
    good = [round(a * 1024 / 360) + 7 for a in az]  # fw < 2.4 style: counted from the smallest
    assert shift_spread(good, az, 1024) <= 1.0

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        complete_metadata(preset, {"beam_azimuth_angles": az, "data_format": {"pixel_shift_by_row": good}})
    bad = [0] * 64  # no shifts at all against azimuths 6.4 deg apart: 18.2 columns
    with pytest.warns(
        UserWarning, match=r"pixel_shift_by_row disagrees with the beam azimuths by up to 18\.2 columns"
    ):
        complete_metadata(
            preset, {"beam_azimuth_angles": az, "data_format": {"pixel_shift_by_row": bad}}, source="f.json"
        )
