import json

import numpy as np
import pytest

from rt_lidar.rinet.runtime import (
    ORT_PROVIDER_ORDER,
    RUNTIMES,
    OnnxRuntimeBackend,
    bundled_model_path,
    load_runtime,
    runtime_unavailable_reason,
)

BUNDLED = bundled_model_path()
pytestmark = pytest.mark.skipif(not BUNDLED.is_file(), reason=f"bundled model missing: {BUNDLED}")


def test_bundled_model_is_small_and_has_its_metrics():
    assert BUNDLED.stat().st_size < 2_000_000
    metrics = json.loads(BUNDLED.with_suffix(".metrics.json").read_text())
    assert {"model", "baseline_keep_all", "command"} <= set(metrics)


@pytest.mark.parametrize("name", list(RUNTIMES))
def test_every_runtime_gives_the_cpu_reference_mask(name: str):
    why = runtime_unavailable_reason(name)
    if why:
        pytest.skip(f"runtime {name}: {why}")
    pytest.importorskip("onnxruntime", reason="the reference is ONNX Runtime on CPU")
    rt = load_runtime(BUNDLED, prefer=name)
    ref = OnnxRuntimeBackend(BUNDLED, providers=["CPUExecutionProvider"])
    img = np.random.default_rng(1).integers(0, 256, (300, 500, 3), dtype=np.uint8)
    got, want = rt.infer(img), ref.infer(img)
    assert got.mask.shape == (1, 1, rt.height, rt.width)
    assert np.all((got.intensity >= 0) & (got.intensity <= 1))
    assert np.all(got.mask[got.drop_prob > 0.5] == 0)
    on_cpu = rt.provider in ("CPUExecutionProvider", "PyTorch CPU")
    tol = 1e-4 if on_cpu else 2e-2  # GPU kernels may run in TF32
    assert np.abs(got.intensity - want.intensity).max() < tol
    assert np.abs(got.drop_prob - want.drop_prob).max() < tol
    assert rt.last_ms > 0


def test_onnxruntime_reports_the_provider_that_ran():
    pytest.importorskip("onnxruntime")
    rt = load_runtime(BUNDLED, prefer="onnxruntime")
    assert rt.provider in ORT_PROVIDER_ORDER
    assert rt.provider == rt.session.get_providers()[0]  # type: ignore[attr-defined]


def test_unknown_runtime_is_a_clear_error():
    from rt_lidar.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown RINet runtime"):
        load_runtime(BUNDLED, prefer="openvino")


def test_runtimes_here_loads_each_that_can_run_and_says_why_not_for_the_rest():
    from rt_lidar.rinet.runtime import runtimes_here

    loaded, skipped = runtimes_here(BUNDLED)
    assert set(loaded) | set(skipped) == set(RUNTIMES) and not set(loaded) & set(skipped)
    assert list(loaded) == [n for n in RUNTIMES if n in loaded]  # best first
    for name, rt in loaded.items():
        assert rt.name == name and (rt.height, rt.width) == (72, 128)
    for name, why in skipped.items():
        assert why == runtime_unavailable_reason(name)
