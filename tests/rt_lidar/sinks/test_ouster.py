"""Ouster packets decoded by ouster-sdk 1.0, which runs in its own venv (tools/setup_ouster_peer.sh)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from peers import needs_peer, peer_python

from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.ouster import ouster_pcap_sink
from rt_lidar.sinks.pcap import point_columns

ROOT = Path(__file__).resolve().parents[3]
PEER = peer_python("ouster")
SHARED = next((p / "shared" for p in (ROOT.parent, ROOT.parents[1]) if (p / "shared").is_dir()), ROOT.parent)
"""``../shared`` beside the checkout (CI), or two up from a worktree under ``wt/``."""
REAL_META = SHARED / "reference" / "real" / "ouster_os1_64" / "OS-1-64_sensor_config_reduced.json"
READER = """
import sys, numpy as np
from ouster.sdk import open_source
from ouster.sdk.core import ChanField
src = open_source(sys.argv[1], meta=[sys.argv[2]], index=False)
np.save(sys.argv[3], np.stack([fs[0].field(ChanField.RANGE).astype(np.uint32) for fs in src]))
"""

pytestmark = needs_peer("ouster")


def _expected(scan, preset, beam_azimuths) -> np.ndarray:
    """Ranges at (ring, firing slot), each beam moved by the columns between the metadata's beam
    azimuth and the preset's (none with our own metadata)."""
    img = np.zeros((preset.n_rings, 1024), np.int64)
    p = scan.points
    shift = -np.round((np.array(beam_azimuths) + preset.azimuth_offsets_deg) * 1024 / 360).astype(int)
    m = (point_columns(preset, scan) - scan.index * 1024 + shift[p["ring"]]) % 1024
    img[p["ring"], m] = np.round(np.sqrt(p["x"] ** 2 + p["y"] ** 2 + p["z"] ** 2) * 1000.0)
    return img


@pytest.mark.parametrize("profile", ["LEGACY", "RNG19"])
@pytest.mark.parametrize("meta", ["ours", "real"])
def test_ouster_sdk_decodes_our_ranges(tmp_path, pipeline_scans, meta, profile):
    preset = load_preset("OS1-64")
    scans = pipeline_scans("OS1-64", 2)
    options = {"metadata": str(REAL_META)} if meta == "real" else {}
    options["profile"] = profile
    if meta == "real" and not REAL_META.exists():
        pytest.skip(f"{REAL_META} absent")
    sink = ouster_pcap_sink(str(tmp_path / "os.pcap"), options)
    sink.open(SinkContext(preset))
    for s in scans:
        sink.write(s)
    sink.close()
    written = json.loads((tmp_path / "os.json").read_text())
    if meta == "real":
        real = json.loads(REAL_META.read_text())
        assert written["beam_intrinsics"]["beam_altitude_angles"] == real["beam_altitude_angles"]
    (tmp_path / "reader.py").write_text(READER)
    out = tmp_path / "ranges.npy"
    args = [str(PEER), str(tmp_path / "reader.py"), str(tmp_path / "os.pcap"), str(tmp_path / "os.json")]
    subprocess.run([*args, str(out)], check=True, timeout=60, capture_output=True)
    ranges = np.load(out)
    assert ranges.shape == (len(scans), 64, 1024)
    for got, scan in zip(ranges, scans, strict=True):
        want = _expected(scan, preset, written["beam_intrinsics"]["beam_azimuth_angles"])
        assert np.abs(got.astype(np.int64) - want).max() <= 1
