"""The PyTorch runtime: the exported ONNX graph run node by node, on the CPU and on CUDA where present."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the torch runtime needs the 'train' extra (torch)")
onnx = pytest.importorskip("onnx")

from rt_lidar.errors import ConfigError  # noqa: E402
from rt_lidar.rinet.runtime import OnnxRuntimeBackend, bundled_model_path, load_runtime  # noqa: E402
from rt_lidar.rinet.torch_runtime import TorchBackend, cuda_available  # noqa: E402

BUNDLED = bundled_model_path()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not cuda_available(), reason="no CUDA device")),
]


@pytest.fixture(scope="module")
def reference() -> OnnxRuntimeBackend:
    pytest.importorskip("onnxruntime", reason="the reference is ONNX Runtime on CPU")
    return OnnxRuntimeBackend(BUNDLED, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("device", DEVICES)
def test_batch_matches_onnxruntime_and_each_image_alone(device: str, reference: OnnxRuntimeBackend):
    rt = TorchBackend(BUNDLED, device=device)
    assert (rt.height, rt.width) == (reference.height, reference.width)
    batch = np.random.default_rng(3).random((3, 3, rt.height, rt.width), dtype=np.float32)
    got, want = rt.infer(batch), reference.infer(batch)
    tol = 1e-5 if device == "cpu" else 2e-2  # CUDA convolutions may run in TF32
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape == (3, 1, rt.height, rt.width)
    assert np.abs(got.intensity - want.intensity).max() < tol
    assert np.abs(got.drop_prob - want.drop_prob).max() < tol
    clear = np.abs(want.drop_prob - 0.5) > tol  # within tol of the threshold either side may drop
    assert clear.mean() > 0.9
    assert np.abs(got.mask - want.mask)[clear].max() < tol
    assert np.all(got.mask[got.drop_prob > 0.5] == 0)
    assert np.array_equal(got.mask[got.drop_prob <= 0.5], got.intensity[got.drop_prob <= 0.5])
    one = rt.infer(batch[1:2])
    assert np.abs(one.intensity[0] - got.intensity[1]).max() < tol
    assert rt.provider == f"PyTorch {device.upper()}" and rt.last_ms > 0


def test_auto_takes_torch_only_on_a_cuda_device():
    rt = load_runtime(BUNDLED)
    assert (rt.name == "torch") == cuda_available() or rt.name == "tensorrt"


def test_an_operation_it_cannot_run_is_refused_by_name(tmp_path: Path):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("rgb", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("intensity", TensorProto.FLOAT, [1, 3, 8, 8])
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["rgb"], ["intensity"], name="sm0")], "g", [x], [y]
    )
    path = tmp_path / "softmax.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(ConfigError, match=r"softmax\.onnx.*Softmax \(node 'sm0'\)"):
        TorchBackend(path, device="cpu")


def test_a_graph_without_the_rinet_outputs_is_refused(tmp_path: Path):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("rgb", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 3, 8, 8])
    graph = helper.make_graph([helper.make_node("Sigmoid", ["rgb"], ["out"])], "g", [x], [y])
    path = tmp_path / "other.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(ConfigError, match=r"other\.onnx.*'drop_prob'"):
        TorchBackend(path, device="cpu")


def test_a_file_that_is_not_onnx_is_a_clear_error(tmp_path: Path):
    bad = tmp_path / "model.onnx"
    bad.write_bytes(BUNDLED.read_bytes()[:1000])
    with pytest.raises(ConfigError, match=r"model\.onnx: not a readable ONNX model"):
        TorchBackend(bad, device="cpu")
    with pytest.raises(FileNotFoundError, match=r"missing\.onnx"):
        TorchBackend(tmp_path / "missing.onnx", device="cpu")


def test_auto_on_a_machine_without_nvidia_s_driver_does_not_import_torch():
    import subprocess
    import sys

    from rt_lidar.rinet.torch_runtime import _nvidia_driver_present

    if _nvidia_driver_present():
        pytest.skip("NVIDIA's driver is here: auto asks PyTorch")
    code = "import sys; "
    code += "from rt_lidar.rinet import load_runtime; load_runtime(); print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.strip() == "False"
