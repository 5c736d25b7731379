"""The HDL-64E's ``--beam full`` dual-return frames on the demo street (seed 3, no noise), cast once per
test process and shared by the tests of the bundle's reasons (crowns, cabins)."""

from __future__ import annotations

from functools import cache
from typing import Any

from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.beam_full import beam_summary
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.beam import BeamConfig


@cache
def street_full_beam(frames: int = 3) -> tuple[list[str], list[Any], dict[str, Any]]:
    """(the world's material names, every sensed frame, the run's ``beam_summary``) of ``frames`` sim
    frames; the frames are shared: read them, do not change them."""
    beam = BeamConfig(return_mode="dual", full=True)
    cfg = PhysicsConfig(beam=beam, receiver_noise=False, range_noise=False)
    built = build_pipeline("HDL-64E", "street", seed=3, physics=cfg)
    sensed: list[Any] = []
    built.pipeline.on_sensed = sensed.append
    try:
        for _ in range(frames):
            built.pipeline.step()
    finally:
        built.pipeline.close()
    return list(built.world.material_names), sensed, beam_summary(built.pipeline)
