"""The array module of a device-resident frame, and its one copy to the host (``--device``, docs/gpu.md).

A frame that runs on the device keeps its arrays in one array module, ``xp``: CuPy on ``--device cuda``,
NumPy on its CPU twin (``--device cuda-source-on-cpu``). The physics is written once against ``xp``; the
points leave the device as one block of bytes, copied once a frame into a page-locked (pinned) host
buffer (:class:`PinnedPoints`) that the sinks read. CuPy is imported here only, and only when a frame
asks for ``cuda``: without it the run stops with one line (:class:`~rt_lidar.errors.ConfigError`).
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError

__all__ = ["PinnedPoints", "TransferCounter", "array_module_of_device", "import_cupy"]

CUPY_MISSING = "needs CuPy and a CUDA device (pip install 'rt-lidar[gpu]')"


def import_cupy(what: str = "--device cuda", check_device: bool = True) -> ModuleType:
    """CuPy, imported now; :class:`ConfigError` (one line, exit 2) where it is missing or (with
    ``check_device``; a caller that has just checked passes False) sees no GPU."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or CUDA's own error on a machine without a driver
        raise ConfigError(f"{what}: {CUPY_MISSING} ({type(exc).__name__})") from None
    if not check_device:
        return cupy
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise ConfigError(f"{what}: {CUPY_MISSING} (no CUDA device)")
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"{what}: {CUPY_MISSING} ({type(exc).__name__})") from None
    return cupy


def array_module_of_device(device: str) -> ModuleType:
    """``xp`` of a frame on ``device``: CuPy on ``cuda``, NumPy on the CPU twin (``cuda-source-on-cpu``)."""
    if device == "cuda":
        return import_cupy()
    if device == "cuda-source-on-cpu":
        return np
    raise ConfigError(f"--device {device}: no device-resident frame (cuda, cuda-source-on-cpu)")


class TransferCounter:
    """Copies between the device and the host, counted (thread-safe): what docs/gpu.md's per-frame
    transfer count is tested against."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.to_device = 0
        self.to_host = 0
        self.bytes_to_host = 0

    def up(self, copies: int = 1) -> None:
        """``copies`` host->device copies."""
        with self._lock:
            self.to_device += copies

    def down(self, nbytes: int) -> None:
        """One device->host copy of ``nbytes``."""
        with self._lock:
            self.to_host += 1
            self.bytes_to_host += int(nbytes)


class PinnedPoints:
    """A page-locked host buffer (NumPy memory on the CPU twin) that grows as a frame needs: the one
    device->host copy of a frame's packed points lands here, and the sinks read a copy of its rows.

    The buffer is reused frame after frame; :meth:`receive` returns the rows as a fresh NumPy array so a
    scan kept by a sink never changes under it."""

    def __init__(self, xp: ModuleType, counter: TransferCounter | None = None) -> None:
        self.xp = xp
        self.counter = counter or TransferCounter()
        self._host: np.ndarray = np.empty(0, np.uint8)
        self._memory: Any = None  # CuPy's PinnedMemoryPointer, kept alive with the view of it
        self._lock = threading.Lock()

    def _reserve(self, nbytes: int) -> np.ndarray:
        if self._host.size < nbytes:
            size = max(nbytes, 2 * self._host.size, 1 << 16)
            if self.xp is np:
                self._host = np.empty(size, np.uint8)
            else:
                self._memory = self.xp.cuda.alloc_pinned_memory(size)
                self._host = np.frombuffer(self._memory, np.uint8, size)
        return self._host[:nbytes]

    def receive(self, packed: Any, dtype: np.dtype) -> np.ndarray:
        """The device's (K, itemsize) uint8 ``packed`` rows copied (once) into the pinned buffer, as a
        fresh (K,) NumPy array of ``dtype``."""
        nbytes = int(packed.size)
        with self._lock:
            host = self._reserve(nbytes)
            if self.xp is np:
                host[...] = packed.reshape(-1)
            else:
                packed.reshape(-1).get(out=host)
            self.counter.down(nbytes)
            return host.view(dtype).copy() if nbytes else np.zeros(0, dtype)
