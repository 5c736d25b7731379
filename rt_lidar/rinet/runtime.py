"""Running an exported RINet: TensorRT when present, else PyTorch on a CUDA GPU, else ONNX Runtime.

- ``tensorrt``: the engine is built from the ONNX file once and cached beside it (or in ``cache_dir``)
  under a name keyed by the file's hash, the TensorRT version and the GPU; inputs and outputs live in
  CuPy device buffers (no pycuda). Needs ``tensorrt``, ``cupy`` and a CUDA device.
- ``torch``: the ONNX graph executed node by node by PyTorch (:mod:`rt_lidar.rinet.torch_runtime`),
  on a CUDA device when one is present, else on the CPU.
- ``onnxruntime``: the execution providers TensorRT > CUDA > CPU that this build offers, in that order;
  :attr:`OnnxRuntimeBackend.provider` reports the one that actually ran.

Both take an RGB image (H, W, 3) uint8 at any size (resized to the model's) or a ready (N, 3, h, w)
float32 batch, and give :class:`InferenceResult`. No PyTorch is needed here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
from PIL import Image

from rt_lidar.errors import ConfigError

__all__ = [
    "BUNDLED_MODEL",
    "ORT_PROVIDER_ORDER",
    "RUNTIMES",
    "InferenceResult",
    "OnnxRuntimeBackend",
    "RinetRuntime",
    "TensorRTBackend",
    "available_runtimes",
    "bundled_model_path",
    "load_runtime",
    "prepare_image",
    "runtime_unavailable_reason",
    "runtimes_here",
]

ORT_PROVIDER_ORDER = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider")
BUNDLED_MODEL = "rinet_small.onnx"


def bundled_model_path() -> Path:
    """The small model shipped with the package."""
    return Path(str(resources.files("rt_lidar.rinet") / "bundled" / BUNDLED_MODEL))


class InferenceResult(NamedTuple):
    """(N, 1, h, w) float32 each: intensity in [0, 1], drop probability, and the mask (0 = drop)."""

    intensity: np.ndarray
    drop_prob: np.ndarray
    mask: np.ndarray


class RinetRuntime(Protocol):
    """What the pipeline stage needs of a runtime."""

    name: str
    provider: str
    width: int
    height: int
    last_ms: float

    def infer(self, rgb: np.ndarray) -> InferenceResult:
        """Run on an (H, W, 3) uint8 image or an (N, 3, h, w) float32 batch."""
        ...


def prepare_image(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    """(1, 3, height, width) float32 in [0, 1] from an (H, W, 3) uint8 image (bilinear resize)."""
    img = np.asarray(rgb)
    if img.ndim == 4:
        return np.ascontiguousarray(img, dtype=np.float32)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ConfigError(f"RINet needs an (H, W, 3) RGB image, got shape {img.shape}")
    if img.shape[:2] != (height, width):
        img = np.asarray(
            Image.fromarray(img.astype(np.uint8)).resize((width, height), Image.Resampling.BILINEAR)
        )
    return np.ascontiguousarray(img.transpose(2, 0, 1)[None], dtype=np.float32) / np.float32(255.0)


class OnnxRuntimeBackend:
    """ONNX Runtime session on the best provider present (TensorRT > CUDA > CPU)."""

    name = "onnxruntime"

    def __init__(self, path: str | Path, providers: list[str] | None = None, threads: int = 0) -> None:
        import onnxruntime as ort

        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"RINet model not found: {self.path}")
        avail = ort.get_available_providers()
        chosen = [p for p in (providers or ORT_PROVIDER_ORDER) if p in avail] or ["CPUExecutionProvider"]
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = int(threads)
        prov: list[Any] = []
        for p in chosen:
            if p == "TensorrtExecutionProvider":
                cache = str(self.path.parent)
                prov.append((p, {"trt_engine_cache_enable": True, "trt_engine_cache_path": cache}))
            else:
                prov.append(p)
        self.session = ort.InferenceSession(str(self.path), opts, providers=prov)
        self.provider: str = self.session.get_providers()[0]
        """The execution provider that runs the graph (the first one the session kept)."""
        shape = self.session.get_inputs()[0].shape
        self.height, self.width = int(shape[2]), int(shape[3])
        self.metadata: dict[str, str] = dict(self.session.get_modelmeta().custom_metadata_map)
        self.last_ms = 0.0

    def infer(self, rgb: np.ndarray) -> InferenceResult:
        x = prepare_image(rgb, self.width, self.height)
        t = time.perf_counter()
        out = self.session.run(["intensity", "drop_prob", "mask"], {"rgb": x})
        self.last_ms = (time.perf_counter() - t) * 1e3
        return InferenceResult(*(np.asarray(o, dtype=np.float32) for o in out))


class TensorRTBackend:
    """A TensorRT engine built from the ONNX file (cached), run on CuPy device buffers."""

    name = "tensorrt"

    def __init__(self, path: str | Path, cache_dir: str | Path | None = None, max_batch: int = 4) -> None:
        import cupy as cp
        import tensorrt as trt

        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"RINet model not found: {self.path}")
        self._cp, self._trt = cp, trt
        self.logger = trt.Logger(trt.Logger.WARNING)
        onnx_bytes = self.path.read_bytes()
        dev = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        sm = f"sm{dev['major']}{dev['minor']}"
        key = hashlib.sha256(onnx_bytes).hexdigest()[:16]
        cache = Path(cache_dir) if cache_dir is not None else self.path.parent
        self.engine_path = cache / f"{self.path.stem}-{key}-trt{trt.__version__}-{sm}.engine"
        if self.engine_path.is_file():
            plan = self.engine_path.read_bytes()
        else:
            plan = self._build(onnx_bytes, max_batch)
            try:
                cache.mkdir(parents=True, exist_ok=True)
                self.engine_path.write_bytes(plan)
            except OSError:  # a read-only install: keep the engine in memory only
                pass
        self.engine = trt.Runtime(self.logger).deserialize_cuda_engine(plan)
        if self.engine is None:
            raise ConfigError(f"{self.engine_path}: TensorRT could not deserialize the engine")
        self.context = self.engine.create_execution_context()
        self.stream = cp.cuda.Stream(non_blocking=True)
        shape = self.engine.get_tensor_shape("rgb")
        self.height, self.width = int(shape[2]), int(shape[3])
        self.provider = "TensorRT"
        self.last_ms = 0.0

    def _build(self, onnx_bytes: bytes, max_batch: int) -> bytes:
        trt = self._trt
        builder = trt.Builder(self.logger)
        network = builder.create_network(0)
        parser = trt.OnnxParser(network, self.logger)
        if not parser.parse(onnx_bytes):
            errs = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise ConfigError(f"{self.path}: TensorRT cannot parse the ONNX file: {errs}")
        inp = network.get_input(0)
        _, c, h, w = inp.shape
        profile = builder.create_optimization_profile()
        profile.set_shape(inp.name, (1, c, h, w), (1, c, h, w), (max_batch, c, h, w))
        config = builder.create_builder_config()
        config.add_optimization_profile(profile)
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise ConfigError(f"{self.path}: TensorRT failed to build an engine")
        return bytes(plan)

    def infer_device(self, x_dev: Any) -> tuple[Any, Any, Any]:
        """Run on a CuPy (N, 3, h, w) float32 array; returns CuPy outputs (nothing leaves the GPU)."""
        cp = self._cp
        x_dev = cp.ascontiguousarray(x_dev, dtype=cp.float32)
        self.context.set_input_shape("rgb", tuple(x_dev.shape))
        self.context.set_tensor_address("rgb", int(x_dev.data.ptr))
        outs = []
        for name in ("intensity", "drop_prob", "mask"):
            buf = cp.empty(tuple(self.context.get_tensor_shape(name)), dtype=cp.float32)
            self.context.set_tensor_address(name, int(buf.data.ptr))
            outs.append(buf)
        if not self.context.execute_async_v3(self.stream.ptr):
            raise ConfigError("TensorRT: execute_async_v3 failed")
        self.stream.synchronize()
        return outs[0], outs[1], outs[2]

    def infer(self, rgb: np.ndarray) -> InferenceResult:
        x = prepare_image(rgb, self.width, self.height)
        t = time.perf_counter()
        outs = self.infer_device(self._cp.asarray(x))
        res = InferenceResult(*(self._cp.asnumpy(o) for o in outs))
        self.last_ms = (time.perf_counter() - t) * 1e3
        return res


def _torch_backend(path: str | Path, device: str | None = None) -> RinetRuntime:
    from rt_lidar.rinet.torch_runtime import TorchBackend

    return TorchBackend(path, device)


RUNTIMES: dict[str, Callable[..., RinetRuntime]] = {
    "tensorrt": TensorRTBackend,
    "torch": _torch_backend,
    "onnxruntime": OnnxRuntimeBackend,
}
"""Best first. ``auto`` takes ``torch`` only where PyTorch sees a CUDA device (on a CPU ONNX Runtime is
the faster and the reference)."""


def runtime_unavailable_reason(name: str) -> str | None:
    """Why runtime ``name`` cannot run here, or None when it can."""
    if name == "onnxruntime":
        return None if importlib.util.find_spec("onnxruntime") else "onnxruntime is not installed"
    if name == "torch":
        for mod in ("torch", "onnx"):
            if importlib.util.find_spec(mod) is None:
                return f"{mod} is not installed (pip install 'rt-lidar[train]')"
        return None
    if name == "tensorrt":
        for mod in ("tensorrt", "cupy"):
            if importlib.util.find_spec(mod) is None:
                return f"{mod} is not installed (pip install 'rt-lidar[trt,gpu]')"
        try:
            import cupy as cp

            if cp.cuda.runtime.getDeviceCount() < 1:
                return "no CUDA device"
        except Exception as exc:  # CUDA driver missing or broken: report it, do not crash
            return f"no usable CUDA device ({exc})"
        return None
    return f"unknown runtime '{name}'"


def _torch_sees_cuda() -> bool:
    from rt_lidar.rinet.torch_runtime import cuda_available

    return cuda_available()


def available_runtimes() -> list[str]:
    """Names of the runtimes that can run here, best first."""
    return [n for n in RUNTIMES if runtime_unavailable_reason(n) is None]


def runtimes_here(path: str | Path | None = None) -> tuple[dict[str, RinetRuntime], dict[str, str]]:
    """Every runtime that can run here, loaded with the model at ``path`` (the bundled one when None),
    best first; and for each of the others why it cannot (what a benchmark reports as skipped)."""
    loaded: dict[str, RinetRuntime] = {}
    skipped: dict[str, str] = {}
    for name in RUNTIMES:
        why = runtime_unavailable_reason(name)
        if why:
            skipped[name] = why
        else:
            loaded[name] = load_runtime(path, prefer=name)
    return loaded, skipped


def load_runtime(path: str | Path | None = None, prefer: str = "auto") -> RinetRuntime:
    """A runtime for the ONNX model at ``path`` (the bundled model when None). ``prefer``: ``auto``
    (TensorRT, else PyTorch on a CUDA device, else ONNX Runtime), ``tensorrt``, ``torch`` or
    ``onnxruntime``."""
    model = Path(path) if path is not None else bundled_model_path()
    if prefer != "auto":
        if prefer not in RUNTIMES:
            raise ConfigError(f"unknown RINet runtime '{prefer}'; known: auto, {', '.join(RUNTIMES)}")
        why = runtime_unavailable_reason(prefer)
        if why:
            raise ConfigError(f"RINet runtime '{prefer}' is not available: {why}")
        return RUNTIMES[prefer](model)
    names = [n for n in available_runtimes() if n != "torch" or _torch_sees_cuda()]
    if not names:
        raise ConfigError("no RINet runtime: install onnxruntime (or tensorrt + cupy on a GPU)")
    return RUNTIMES[names[0]](model)
