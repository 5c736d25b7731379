"""Run a CUDA C kernel's own source on the CPU: the CPU twin of a CuPy ``RawKernel`` for the tests.

The source is compiled as C++ by the host compiler with a prelude that makes ``__global__`` and
``__device__`` plain functions and ``threadIdx`` / ``blockIdx`` / ``blockDim`` / ``gridDim`` globals;
a generated launcher loops over the grid and the block, one call per thread, in order. Kernels whose
threads only write their own outputs (the project's do) then compute exactly what the GPU computes,
up to floating-point contraction (``nvcc`` fuses multiply-adds by default; this build does not).

:class:`HostKernel` is called like ``cupy.RawKernel``: ``kernel(grid, block, args)`` with NumPy
arrays for pointers and NumPy scalars for values, so a kernel's CuPy wrapper can run unchanged on
NumPy arrays. Builds are cached by source hash under the user cache directory.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["HostKernel", "KernelBuildError", "host_compiler", "kernel_parameters"]

PRELUDE = r"""
#include <cmath>
#include <math.h>
using std::isnan;
struct rt_host_dim3 { unsigned int x, y, z; };
static thread_local rt_host_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
"""

# C parameter type -> ctypes type of a value parameter
_VALUE_TYPES: dict[str, Any] = {
    "int": ctypes.c_int,
    "unsigned int": ctypes.c_uint,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "long long": ctypes.c_longlong,
    "unsigned long long": ctypes.c_ulonglong,
    "u64": ctypes.c_ulonglong,
    "unsigned char": ctypes.c_ubyte,
    "bool": ctypes.c_bool,
}


class KernelBuildError(RuntimeError):
    """The host compiler is missing or refused the kernel source."""


def host_compiler() -> str | None:
    """The C++ compiler used for host builds (``$CXX``, else ``g++`` / ``c++`` / ``clang++`` on PATH)."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


def kernel_parameters(source: str, name: str) -> list[tuple[str, str, bool]]:
    """``(type, name, is_pointer)`` of each parameter of ``extern "C" __global__ void name(...)``."""
    m = re.search(r"__global__\s+void\s+" + re.escape(name) + r"\s*\(([^)]*)\)", source)
    if m is None:
        raise KernelBuildError(f"no __global__ kernel named {name!r} in the source")
    params = []
    for raw in m.group(1).split(","):
        decl = " ".join(raw.replace("*", " * ").split())
        pointer = "*" in decl
        words = [w for w in decl.replace("*", " ").split() if w not in ("const", "__restrict__")]
        if len(words) < 2:
            raise KernelBuildError(f"kernel {name}: cannot read the parameter {raw.strip()!r}")
        ctype, pname = " ".join(words[:-1]), words[-1]
        if not pointer and ctype not in _VALUE_TYPES:
            raise KernelBuildError(f"kernel {name}: parameter type {ctype!r} has no host mapping")
        params.append((ctype, pname, pointer))
    return params


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(base) / "rt-lidar" / "cuda-host"
    path.mkdir(parents=True, exist_ok=True)
    return path


class HostKernel:
    """``source``'s kernel ``name`` built for the CPU; call it as ``kernel(grid, block, args)``."""

    def __init__(self, source: str, name: str) -> None:
        self.name = name
        self.params = kernel_parameters(source, name)
        decl = ", ".join(f"{'void' if p else t}{' *' if p else ' '}{n}" for t, n, p in self.params)
        call = ", ".join(f"({t} *){n}" if p else n for t, n, p in self.params)
        head = f'extern "C" void rt_host_launch_{name}(unsigned int rt_gx, unsigned int rt_bx'
        launcher = (  # rt_-prefixed locals: a kernel parameter may be called b, t, ...
            f"\n{head}{', ' if decl else ''}{decl}) {{\n"
            "    gridDim.x = rt_gx; gridDim.y = gridDim.z = 1;\n"
            "    blockDim.x = rt_bx; blockDim.y = blockDim.z = 1;\n"
            "    blockIdx.y = blockIdx.z = threadIdx.y = threadIdx.z = 0;\n"
            "    for (unsigned int rt_b = 0; rt_b < rt_gx; ++rt_b) { blockIdx.x = rt_b;\n"
            "        for (unsigned int rt_t = 0; rt_t < rt_bx; ++rt_t) {\n"
            f"            threadIdx.x = rt_t; {name}({call});\n        }}\n"
            "    }\n}\n"
        )
        code = PRELUDE + source + launcher
        digest = hashlib.sha256(code.encode()).hexdigest()[:20]
        lib = _cache_dir() / f"{name}-{digest}.so"
        if not lib.exists():
            self._build(code, lib)
        self._lib = ctypes.CDLL(str(lib))
        self._fn = getattr(self._lib, f"rt_host_launch_{name}")
        self._fn.restype = None
        self._fn.argtypes = [ctypes.c_uint, ctypes.c_uint] + [
            ctypes.c_void_p if p else _VALUE_TYPES[t] for t, _n, p in self.params
        ]

    @staticmethod
    def _build(code: str, lib: Path) -> None:
        cxx = host_compiler()
        if cxx is None:
            raise KernelBuildError("no C++ compiler (set CXX, or install g++) to build a kernel for the CPU")
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "kernel.cpp"
            src.write_text(code)
            out = Path(tmp) / lib.name
            cmd = [cxx, "-O2", "-ffp-contract=off", "-shared", "-fPIC", "-o", str(out), str(src)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise KernelBuildError(f"{cxx} refused the kernel source:\n{proc.stderr[-4000:]}")
            os.replace(out, lib)  # atomic: a concurrent build never leaves a half-written library

    def __call__(self, grid: Sequence[int], block: Sequence[int], args: Sequence[Any]) -> None:
        """Run every thread of the 1-D ``grid`` x ``block`` launch on ``args`` (as ``RawKernel`` takes)."""
        if len(args) != len(self.params):
            raise TypeError(f"kernel {self.name} takes {len(self.params)} arguments, got {len(args)}")
        values: list[Any] = []
        keep: list[np.ndarray] = []
        for (ctype, pname, pointer), arg in zip(self.params, args, strict=True):
            if pointer:
                arr = arg
                if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous:
                    raise TypeError(f"kernel {self.name}: {pname} needs a C-contiguous NumPy array")
                keep.append(arr)
                values.append(arr.ctypes.data)
            else:
                values.append(_VALUE_TYPES[ctype](arg.item() if hasattr(arg, "item") else arg))
        self._fn(int(grid[0]), int(block[0]), *values)
        del keep
