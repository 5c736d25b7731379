import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.rinet.masks import project
from rt_lidar.rinet.runtime import InferenceResult, bundled_model_path
from rt_lidar.rinet.stage import RinetStage, camera_projection, rgb_from_airsim
from rt_lidar.unreal_bridge.world import CameraSpec


class _FakeRuntime:
    """Drops the left half of the image, gives intensity 0.25 elsewhere."""

    name, provider, width, height, last_ms = "fake", "none", 64, 36, 0.0

    def infer(self, rgb: np.ndarray) -> InferenceResult:
        drop = np.zeros((1, 1, self.height, self.width), np.float32)
        drop[..., : self.width // 2] = 1.0
        inten = np.full_like(drop, 0.25)
        return InferenceResult(inten, drop, np.where(drop > 0.5, 0, inten))


@pytest.fixture(scope="module")
def street():
    built = build_pipeline("HDL-64E", "street", seed=0)
    scan = built.pipeline.scans(1)[0]
    return built, scan


def _in_view(stage: RinetStage, scan) -> np.ndarray:
    xyz = np.stack([scan.points["x"], scan.points["y"], scan.points["z"]], 1)
    return project(xyz, stage.projection, stage.runtime.width, stage.runtime.height)[3]


def test_stage_drops_and_reintensifies_only_what_the_camera_sees(street):
    built, scan = street
    cam = CameraSpec(width=128, height=72)
    stage = RinetStage(None, cam, built.world.scene.sensor_mount, runtime=_FakeRuntime())
    rgb = built.world.render_camera(cam, stage.camera_time_ns(scan) * 1e-9).rgb
    inside = _in_view(stage, scan)
    assert 1000 < inside.sum() < scan.points.size
    out = stage.apply(scan, rgb)
    # outside the camera: untouched physics points, in order
    outside = scan.points[~inside]
    kept_out = out.points[~_in_view(stage, out)]
    assert np.array_equal(kept_out, outside)
    kept_in = out.points[_in_view(stage, out)]
    assert kept_in.size == stage.last.reintensified > 0
    assert np.all(kept_in["intensity"] == np.float32(0.25 * 255))
    assert stage.last.dropped == int(inside.sum()) - kept_in.size > 0
    assert out.dropped == scan.dropped + stage.last.dropped
    # the left half (image u < w/2) is the sensor's +y side
    assert np.all(kept_in["y"] < 0.5)
    # the scan carries what the stage saw and said: the image, and the mask (0 where dropped)
    assert out.camera is not None and out.camera.rgb is rgb and out.camera.time_ns == scan.start_ns
    assert out.camera.mask.shape == (36, 64) and out.camera.mask.dtype == np.float32
    assert not out.camera.mask[:, :32].any() and np.all(out.camera.mask[:, 32:] == np.float32(0.25))
    assert stage.apply(scan, rgb, time_ns=123).camera.time_ns == 123  # type: ignore[union-attr]


def test_the_stream_carries_the_stages_camera_and_mask_to_the_viewer(tmp_path):
    """``demo --rinet --sink zmq:...``: each scan is followed by the camera frame the model saw and the
    intensity mask it predicted, at the model's resolution, as the viewer's camera panel shows them."""
    pytest.importorskip("onnxruntime")
    import socket

    from rt_lidar.cli.main import main
    from rt_lidar.session.demo import RINET_CAMERA
    from rt_lidar.sinks.stream import StreamSubscriber

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{sk.getsockname()[1]}"
    # a reader thread takes every frame as it comes and keeps the newest of each kind; a PUB socket
    # sends nothing to a subscriber before it has joined (about half a second here after the bind),
    # so the run is long enough for the scans after that
    with StreamSubscriber(address, background=True) as sub:
        args = ["demo", "--preset", "VLP-16", "--frames", "20", "--in-process", "--quiet", "--rinet"]
        assert main([*args, "--out", str(tmp_path), "--sink", f"zmq:{address}"]) == 0
        got = sub.poll(1000)
        assert sub.stats.received >= 4, sub.stats  # scans and camera frames
    assert "camera" in got, f"no camera frame on the stream: {sorted(got)}"
    cam = got["camera"]
    assert cam.rgb is not None and cam.rgb.shape == (RINET_CAMERA.height, RINET_CAMERA.width, 3)
    assert cam.rgb.std() > 5  # a rendered street, not a blank image
    assert cam.mask is not None and cam.mask.shape == (72, 128)  # the bundled model's resolution
    assert float(cam.mask.min()) >= 0.0 and float(cam.mask.max()) <= 1.0
    assert (cam.mask == 0).any() and (cam.mask > 0).mean() > 0.5  # some rays dropped, most kept


@pytest.mark.skipif(not bundled_model_path().is_file(), reason="bundled model missing")
def test_stage_with_the_bundled_model_on_an_embedded_scan(street):
    pytest.importorskip("onnxruntime")
    built, scan = street
    cam = CameraSpec(width=256, height=144)
    stage = RinetStage(None, cam, built.world.scene.sensor_mount)
    rgb = built.world.render_camera(cam, stage.camera_time_ns(scan) * 1e-9).rgb
    out = stage.apply(scan, rgb)
    assert stage.last.in_view > 1000 and stage.last.provider
    assert out.points.size == scan.points.size - stage.last.dropped
    inten = out.points["intensity"][_in_view(stage, out)]
    assert inten.min() >= 0 and inten.max() <= 255


def test_camera_projection_puts_the_optical_axis_at_the_image_centre():
    from rt_lidar.unreal_bridge.world import Pose

    cam = CameraSpec(width=200, height=100, mount=Pose.from_xyz_rpy(0.2, 0, 1.7))
    p = camera_projection(cam, Pose.from_xyz_rpy(0, 0, 1.8))
    u, v, d, inside = project(np.array([[20.2, 0.0, -0.1]]), p, 200, 100)
    assert (
        inside[0] and u[0] == pytest.approx(100) and v[0] == pytest.approx(50) and d[0] == pytest.approx(20)
    )


def test_rgb_from_airsim_decodes_raw_bgr_and_png():
    from rt_lidar.unreal_bridge.wire import FluImage

    rgb = np.random.default_rng(0).integers(0, 256, (4, 5, 3), dtype=np.uint8)
    raw = FluImage(width=5, height=4, data_uint8=rgb[:, :, ::-1].tobytes(), compress=False)
    assert np.array_equal(rgb_from_airsim(raw), rgb)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    png = FluImage(width=5, height=4, data_uint8=buf.getvalue(), compress=True)
    assert np.array_equal(rgb_from_airsim(png), rgb)
    with pytest.raises(ValueError, match="bytes"):
        rgb_from_airsim(FluImage(width=5, height=4, data_uint8=b"\0" * 7, compress=False))


def test_generate_pairs_writes_a_trainable_mask_dir(tmp_path: Path):
    from rt_lidar.rinet.masks import LABEL_RETURN, IntensityMask
    from rt_lidar.rinet.pairs import PairsConfig, generate_pairs

    idx = generate_pairs(tmp_path, PairsConfig(scans_per_seed=1, every=1, width=128, height=72))
    (fr,) = idx["frames"]
    assert fr["points_in_image"] > 1000 and fr["return_pixels"] > 0.3 * 128 * 72
    m = IntensityMask.load(tmp_path / fr["mask"])
    assert m.intensity[m.label == LABEL_RETURN].max() <= 1.0
    assert (tmp_path / fr["image"]).is_file() and (tmp_path / "masks.json").is_file()
