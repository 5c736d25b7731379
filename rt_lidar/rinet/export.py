"""ONNX export of a trained RINet generator, checked against PyTorch.

The graph takes ``rgb`` (N, 3, H, W) float32 in [0, 1] and gives ``intensity``, ``drop_prob`` and
``mask`` (N, 1, H, W); the batch is dynamic, the resolution is the model's. The settings and the
input/output names are stored in the ONNX metadata (``rinet.width``, ``rinet.height``), which the
runtime reads back.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

__all__ = ["INPUT_NAME", "OUTPUT_NAMES", "compare_onnx", "export_onnx"]

INPUT_NAME = "rgb"
OUTPUT_NAMES = ("intensity", "drop_prob", "mask")


def export_onnx(
    checkpoint_or_model: str | Path | object, path: str | Path, opset: int = 17, metrics: dict | None = None
) -> Path:
    """Write the inference graph of a checkpoint (or a :class:`~rt_lidar.rinet.model.Generator`) to
    ``path``; returns it. ``metrics`` (a training metrics dict) goes into the metadata."""
    import onnx
    import torch

    from rt_lidar.rinet.model import Generator, RinetExport
    from rt_lidar.rinet.train import load_generator

    gen = checkpoint_or_model if isinstance(checkpoint_or_model, Generator) else None
    if gen is None:
        gen = load_generator(str(checkpoint_or_model))
    gen.eval()
    cfg = gen.cfg
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    dummy = torch.rand(1, 3, cfg.height, cfg.width)
    with warnings.catch_warnings():  # the TorchScript exporter warns it is legacy; dynamo needs onnxscript
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            RinetExport(gen).eval(),
            (dummy,),
            str(out),
            input_names=[INPUT_NAME],
            output_names=list(OUTPUT_NAMES),
            opset_version=opset,
            dynamo=False,
            dynamic_axes={INPUT_NAME: {0: "batch"}, **{n: {0: "batch"} for n in OUTPUT_NAMES}},
        )
    model = onnx.load(str(out))
    meta = {
        "rinet.width": str(cfg.width),
        "rinet.height": str(cfg.height),
        "rinet.config": json.dumps(cfg.to_dict()),
    }
    if metrics is not None:
        meta["rinet.metrics"] = json.dumps(metrics)
    for k, v in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = k, v
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    return out


def compare_onnx(checkpoint_or_model: str | Path | object, onnx_path: str | Path, seed: int = 0) -> float:
    """Max abs difference of every output between PyTorch and ONNX Runtime (CPU) on a random image."""
    import onnxruntime as ort
    import torch

    from rt_lidar.rinet.model import Generator, RinetExport
    from rt_lidar.rinet.train import load_generator

    gen = checkpoint_or_model if isinstance(checkpoint_or_model, Generator) else None
    if gen is None:
        gen = load_generator(str(checkpoint_or_model))
    gen.eval()
    x = np.random.default_rng(seed).random((1, 3, gen.cfg.height, gen.cfg.width), dtype=np.float32)
    with torch.no_grad():
        ref = [t.numpy() for t in RinetExport(gen).eval()(torch.from_numpy(x))]
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = sess.run(list(OUTPUT_NAMES), {INPUT_NAME: x})
    # mask is a threshold of drop_prob: compare it where drop_prob is not at the threshold
    diffs = [float(np.abs(np.asarray(g) - r).max()) for g, r in zip(got[:2], ref[:2], strict=True)]
    near = np.abs(ref[1] - 0.5) < 1e-4
    diffs.append(float(np.abs(np.asarray(got[2]) - ref[2])[~near].max()))
    return max(diffs)
