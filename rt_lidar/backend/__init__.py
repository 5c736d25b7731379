"""Where and how the physics runs, chosen once per pipeline: the backend layer.

:mod:`rt_lidar.backend.physics_ops` defines :class:`PhysicsBackend`, the operations the physics modules
call (:mod:`rt_lidar.physics.model`, :mod:`rt_lidar.physics.echo`), with the NumPy implementation
(:class:`NumpyBackend`, the reference) and the compiled twins (:class:`CompiledBackend`, bit for bit the
NumPy values, from :mod:`rt_lidar.physics.fused`); each carries the device its weather and echo-waveform
kernels run on (``cpu``, ``cuda``, or ``cuda-host``: the CUDA C source compiled for the CPU);
:func:`select_backend` makes the choice. The in-process caster and the sweep take theirs from
:mod:`rt_lidar.backend.source_ops` (NumPy, or the :mod:`rt_lidar.pipeline.source_steps` twins).
:mod:`rt_lidar.backend.schedule` decides the frame loop's threads (frames fetched ahead, where the
physics runs) from what a source states in its :class:`~rt_lidar.pipeline.sources.Capabilities`.
docs/determinism.md states what each backend promises.
"""

from rt_lidar.backend.physics_ops import (
    BACKEND_NAMES,
    CompiledBackend,
    NumpyBackend,
    PhysicsBackend,
    available_backends,
    default_backend,
    select_backend,
)

__all__ = [
    "BACKEND_NAMES",
    "CompiledBackend",
    "NumpyBackend",
    "PhysicsBackend",
    "available_backends",
    "default_backend",
    "select_backend",
]
