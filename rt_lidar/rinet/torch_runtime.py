"""Running an exported RINet with PyTorch: the ONNX graph executed node by node on a CUDA GPU or the CPU.

For a machine with a GPU and PyTorch but no TensorRT (and no CUDA build of ONNX Runtime). The ONNX
file stays the one model format: its weights and graph are read with ``onnx`` and each node runs as the
matching ``torch`` operation, so no checkpoint or Python model class is needed. The graph must be
static in its shapes and use only the operations this module maps to PyTorch (what ``rinet export``
writes, and a few more); anything else is refused when the file is loaded, naming the node.
"""

from __future__ import annotations

import ctypes.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.rinet.runtime import InferenceResult, prepare_image

__all__ = ["TorchBackend", "cuda_available"]


def _nvidia_driver_present() -> bool:
    return (
        os.path.exists("/dev/nvidiactl")
        or os.path.exists("/proc/driver/nvidia/version")
        or ctypes.util.find_library("cuda") is not None
    )


def cuda_available() -> bool:
    """True when PyTorch imports and sees a CUDA device. Where there is no sign of NVIDIA's driver it
    answers without importing PyTorch (seconds and hundreds of MB on a machine that cannot use it)."""
    if "torch" not in sys.modules and not _nvidia_driver_present():
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _conv(torch: Any, transpose: bool) -> Callable[..., Any]:
    def run(attrs: dict[str, Any], x: Any, w: Any, b: Any = None) -> Any:
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        if pads[:2] != pads[2:]:
            raise ConfigError(f"asymmetric padding {pads} is not supported")
        kw = {
            "stride": tuple(attrs.get("strides", [1, 1])),
            "padding": tuple(pads[:2]),
            "dilation": tuple(attrs.get("dilations", [1, 1])),
            "groups": int(attrs.get("group", 1)),
        }
        if transpose:
            out_pad = tuple(attrs.get("output_padding", [0, 0]))
            return torch.nn.functional.conv_transpose2d(x, w, b, output_padding=out_pad, **kw)
        return torch.nn.functional.conv2d(x, w, b, **kw)

    return run


def _slice(torch: Any) -> Callable[..., Any]:
    def run(
        attrs: dict[str, Any], x: Any, starts: Any, ends: Any, axes: Any = None, steps: Any = None
    ) -> Any:
        del attrs
        s, e = starts.tolist(), ends.tolist()
        ax = axes.tolist() if axes is not None else list(range(len(s)))
        st = steps.tolist() if steps is not None else [1] * len(s)
        index = [slice(None)] * x.dim()
        for a, lo, hi, step in zip(ax, s, e, st, strict=True):
            index[a] = slice(lo, min(hi, x.shape[a]), step)
        return x[tuple(index)]

    return run


def _constant_of_shape(torch: Any) -> Callable[..., Any]:
    def run(attrs: dict[str, Any], shape: Any) -> Any:
        fill = np.asarray(attrs.get("value", np.zeros(1, np.float32)))  # ONNX's default: float32 zero
        dims = [int(d) for d in shape.tolist()]
        value = torch.from_numpy(fill.reshape(-1)[:1].copy())
        return torch.full(dims, value.item(), dtype=value.dtype, device=shape.device)

    return run


def _ops(torch: Any) -> dict[str, Callable[..., Any]]:
    """ONNX op type -> ``f(attrs, *inputs)`` on torch tensors."""
    f = torch.nn.functional
    return {
        "Conv": _conv(torch, transpose=False),
        "ConvTranspose": _conv(torch, transpose=True),
        "LeakyRelu": lambda a, x: f.leaky_relu(x, float(a.get("alpha", 0.01))),
        "Relu": lambda a, x: torch.relu(x),
        "Sigmoid": lambda a, x: torch.sigmoid(x),
        "Concat": lambda a, *xs: torch.cat(xs, dim=int(a["axis"])),
        "Slice": _slice(torch),
        "Add": lambda a, x, y: x + y,
        "Sub": lambda a, x, y: x - y,
        "Mul": lambda a, x, y: x * y,
        "Div": lambda a, x, y: x / y,
        "Greater": lambda a, x, y: x > y,
        "Where": lambda a, c, x, y: torch.where(c, x, y),
        "Shape": lambda a, x: torch.tensor(list(x.shape), dtype=torch.int64, device=x.device),
        "Identity": lambda a, x: x,
        "ConstantOfShape": _constant_of_shape(torch),
    }


class TorchBackend:
    """An exported RINet (ONNX) run by PyTorch on ``device`` (default: CUDA when present, else CPU)."""

    name = "torch"

    def __init__(self, path: str | Path, device: str | None = None) -> None:
        import onnx
        import torch
        from onnx import numpy_helper

        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"RINet model not found: {self.path}")
        self._torch = torch
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        try:
            model = onnx.load(str(self.path))
        except Exception as exc:  # a truncated or foreign file
            raise ConfigError(f"{self.path}: not a readable ONNX model ({exc})") from exc
        graph = model.graph
        self._ops = _ops(torch)
        supported = {*self._ops, "Constant"}  # constants are folded when the file is read
        bad = [f"{n.op_type} (node '{n.name}')" for n in graph.node if n.op_type not in supported]
        if bad:
            raise ConfigError(
                f"{self.path}: the torch runtime cannot run {', '.join(bad)}; "
                f"supported: {', '.join(sorted(supported))}"
            )
        self._values: dict[str, Any] = {
            t.name: self._tensor(numpy_helper.to_array(t)) for t in graph.initializer
        }
        self._nodes: list[tuple[str, list[str], list[str], dict[str, Any]]] = []
        for n in graph.node:
            attrs = _attrs(n)
            if n.op_type == "Constant":  # folded once: a constant is a value, not a step
                self._values[n.output[0]] = self._tensor(numpy_helper.to_array(attrs["value"]))
                continue
            if n.op_type == "ConstantOfShape" and "value" in attrs:
                attrs["value"] = numpy_helper.to_array(attrs["value"])
            self._nodes.append((n.op_type, list(n.input), list(n.output), attrs))
        self._input = graph.input[0].name
        self._outputs = ("intensity", "drop_prob", "mask")
        missing = set(self._outputs) - {o.name for o in graph.output}
        if missing:
            raise ConfigError(
                f"{self.path}: outputs {sorted(missing)} missing; "
                "a RINet export has intensity, drop_prob and mask"
            )
        dims = graph.input[0].type.tensor_type.shape.dim
        self.height, self.width = int(dims[2].dim_value), int(dims[3].dim_value)
        self.provider = f"PyTorch {self.device.type.upper()}"
        self.last_ms = 0.0

    def _tensor(self, a: np.ndarray) -> Any:
        return self._torch.from_numpy(np.array(a)).to(self.device)

    def _run(self, x: Any) -> tuple[Any, Any, Any]:
        torch = self._torch
        env = dict(self._values)
        env[self._input] = x
        with torch.inference_mode():
            for op, ins, outs, attrs in self._nodes:
                env[outs[0]] = self._ops[op](attrs, *(env[i] if i else None for i in ins))
        intensity, drop_prob, mask = (env[name] for name in self._outputs)
        return intensity, drop_prob, mask

    def infer_device(self, x_dev: Any) -> tuple[Any, Any, Any]:
        """Run on a torch (N, 3, h, w) float32 tensor on this backend's device; outputs stay there."""
        return self._run(x_dev.to(self.device, self._torch.float32).contiguous())

    def infer(self, rgb: np.ndarray) -> InferenceResult:
        x = prepare_image(rgb, self.width, self.height)
        t = time.perf_counter()
        outs = self._run(self._torch.from_numpy(x).to(self.device))
        res = InferenceResult(*(o.float().cpu().numpy() for o in outs))  # .cpu() waits for the device
        self.last_ms = (time.perf_counter() - t) * 1e3
        return res
