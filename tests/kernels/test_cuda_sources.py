"""The CUDA kernel sources: device compilation by nvcc (where the toolkit is), and the host build that
runs them on the CPU (its errors name what was wrong)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.kernels import bvh_cuda, waveform_cuda, weather_cuda
from rt_lidar.kernels.cuda_host import HostKernel, KernelBuildError, kernel_parameters

SOURCES = [
    (weather_cuda.CUDA_SOURCE, "weather_kernel"),
    (waveform_cuda.CUDA_SOURCE, "wf_peaks"),
    (bvh_cuda.CUDA_SOURCE, bvh_cuda.KERNEL_NAME),
]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no CUDA toolkit (nvcc) on this machine")
@pytest.mark.parametrize(("source", "name"), SOURCES, ids=[n for _, n in SOURCES])
def test_sources_compile_for_the_gpu(tmp_path: Path, source: str, name: str) -> None:
    """nvcc builds each kernel for an sm_80 (A100) and an sm_90 (H100/H200) device."""
    cu = tmp_path / f"{name}.cu"
    cu.write_text(source)
    for arch in ("sm_80", "sm_90"):
        out = tmp_path / f"{name}.{arch}.cubin"
        proc = subprocess.run(
            ["nvcc", f"-arch={arch}", "--cubin", "-o", str(out), str(cu)], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        assert out.stat().st_size > 1000 and name.encode() in out.read_bytes()


def test_host_kernel_reads_the_signature_and_checks_calls() -> None:
    params = kernel_parameters(waveform_cuda.CUDA_SOURCE, "wf_peaks")
    assert params[0] == ("double", "t", True) and params[4] == ("int", "P", False) and len(params) == 16
    src = 'extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {\n'
    src += "    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }\n"
    k = HostKernel(src, "axpy")
    x, y = np.arange(10, dtype=np.float32), np.ones(10, np.float32)
    k((3,), (4,), (np.float32(2.0), x, y, np.int32(10)))
    np.testing.assert_array_equal(y, 1 + 2 * x)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        k((1,), (1,), (x, y))
    with pytest.raises(TypeError, match="C-contiguous NumPy array"):
        k((1,), (10,), (np.float32(2.0), x[::2], y, np.int32(5)))
    with pytest.raises(KernelBuildError, match="no __global__ kernel named 'nope'"):
        HostKernel(src, "nope")
    with pytest.raises(KernelBuildError, match="refused the kernel source"):
        HostKernel(src.replace("y[i] +=", "undeclared[i] +="), "axpy")
