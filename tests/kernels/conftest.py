"""The backends a CUDA kernel's parity test runs on: its own source compiled for the CPU (always,
where a C++ compiler is), and CuPy on a GPU (where one is)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from rt_lidar.kernels.cuda_host import HostKernel, host_compiler
from rt_lidar.kernels.xp import cupy_available


@dataclass(frozen=True)
class CudaBackend:
    """How a test puts arrays on the backend, takes them back, and launches a kernel source."""

    name: str
    asarray: Callable[[np.ndarray], Any]
    asnumpy: Callable[[Any], np.ndarray]
    kernel: Callable[[str, str], Any]  # (source, name) -> launcher; None = the wrapper's RawKernel


def _host() -> CudaBackend:
    return CudaBackend("cuda-source-on-cpu", np.ascontiguousarray, np.asarray, HostKernel)


def _cupy() -> CudaBackend:
    import cupy as cp

    return CudaBackend("cupy", cp.asarray, cp.asnumpy, lambda source, name: None)


@pytest.fixture(params=["cuda-source-on-cpu", "cupy"])
def cuda_backend(request: pytest.FixtureRequest) -> CudaBackend:
    if request.param == "cupy":
        if not cupy_available():
            pytest.skip("CuPy with a CUDA device is not available")
        return _cupy()
    if host_compiler() is None:
        pytest.skip("no C++ compiler to build the CUDA source for the CPU")
    return _host()
