"""Where the per-ray kernels of the physics run: the CPU (NumPy) or a CUDA GPU (CuPy).

With ``cuda`` the weather model and the echo waveform's returns take their batch to the GPU, run the
CUDA twins there (:mod:`kernels.weather_cuda`, :mod:`kernels.waveform_cuda`) and bring the results
back into the same host arrays, so the rest of the frame loop does not change. Their draws come from
the same counter-based generator and the same ``rng`` draws, so a scan matches the CPU one except for
the rare outcome that float32 arithmetic on the GPU puts on the other side of a threshold.

``cuda-host`` (:data:`HOST_CUDA`, a backend's device, not a user's choice) runs those kernels' own CUDA C
source compiled for the CPU (:class:`~rt_lidar.kernels.cuda_host.HostKernel`) on the host arrays: what a
GPU computes, on a machine without one (the tests' cross-backend comparison, docs/determinism.md).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from rt_lidar.kernels.waveform import Returns, waveform_returns
from rt_lidar.kernels.xp import cupy_available

__all__ = ["HOST_CUDA", "KERNEL_DEVICES", "device_unavailable_reason", "run_waveform_returns", "run_weather"]

KERNEL_DEVICES = ("cpu", "cuda")
HOST_CUDA = "cuda-host"
"""The kernels' CUDA C source compiled for the CPU (a backend's device for the tests)."""


def device_unavailable_reason(device: str) -> str | None:
    """Why ``device`` cannot run the kernels here, or None when it can."""
    if device == "cpu":
        return None
    if device == "cuda":
        return None if cupy_available() else "needs CuPy and a CUDA device (pip install 'rt-lidar[gpu]')"
    if device == HOST_CUDA:
        from rt_lidar.kernels.cuda_host import host_compiler

        return None if host_compiler() is not None else "needs a C++ compiler to build the CUDA source"
    return f"unknown kernel device {device!r}; known: {', '.join(KERNEL_DEVICES)}"


def _cupy() -> Any:
    import cupy

    return cupy


def run_waveform_returns(device: str, t_ns: np.ndarray, amp: np.ndarray, *args: Any) -> Returns:
    """:func:`rt_lidar.kernels.waveform.waveform_returns` of host arrays on ``device``; host arrays back."""
    if device == "cpu":
        return waveform_returns(t_ns, amp, *args)
    if device == HOST_CUDA:
        from rt_lidar.kernels import waveform_cuda

        returns: Any = waveform_returns  # its keyword after the positional arguments
        return returns(t_ns, amp, *args, peaks_kernel=_host_kernel(waveform_cuda.CUDA_SOURCE, "wf_peaks"))
    cp = _cupy()
    ret = waveform_returns(cp.asarray(t_ns), cp.asarray(amp), *args)
    return Returns(*(cp.asnumpy(x) for x in ret))


def run_weather(
    device: str,
    model: Any,
    range_m: np.ndarray,
    power_w: np.ndarray,
    flags: np.ndarray,
    *rest: Any,
    **kw: Any,
) -> None:
    """``model.apply(range_m, power_w, flags, direction, preset, threshold_w, rng, **kw)`` on ``device``:
    the host arrays it changes in place (range, power, flags, ``reflectivity``, ``segment``, ``echoes``)
    hold the result afterwards, as on the CPU."""
    if device == "cpu":
        model.apply(range_m, power_w, flags, *rest, **kw)
        return
    if device == HOST_CUDA:
        from rt_lidar.kernels import weather_cuda

        model.apply(
            range_m,
            power_w,
            flags,
            *rest,
            **kw,
            kernel=_host_kernel(weather_cuda.CUDA_SOURCE, "weather_kernel"),
        )
        return
    cp = _cupy()
    host: list[np.ndarray] = [range_m, power_w, flags]
    dev = [cp.asarray(a) for a in host]
    for name in ("reflectivity", "segment"):
        if kw.get(name) is not None:
            host.append(kw[name])
            kw[name] = cp.asarray(kw[name])
            dev.append(kw[name])
    if kw.get("echoes") is not None:
        outs = kw["echoes"]
        kw["echoes"] = tuple(cp.asarray(e) for e in outs)
        host.extend(outs)
        dev.extend(kw["echoes"])
    model.apply(*dev[:3], *rest, **kw)
    for h, d in zip(host, dev, strict=True):
        h[...] = cp.asnumpy(d)


@functools.cache
def _host_kernel(source: str, name: str) -> Any:
    """The CUDA kernel ``name`` of ``source`` built for the CPU (once a process)."""
    from rt_lidar.kernels.cuda_host import HostKernel

    return HostKernel(source, name)
