"""summary.json's ``beam`` counts of ``--beam full`` (pulses, bundled pulses, their share and reasons)
are those of the frames the frame loop handed on, the ones the scans were made of: the same run counts
the same whether its frames were cast ahead or not, and however slowly the loop's consumer takes them
(frames cast ahead meanwhile and dropped at the end never count). In-process on every backend present
(the CPU, the device frame's CPU twin, CUDA where there is one), and over the bridge."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rt_lidar.api import in_process_pipeline
from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.config import RunConfig
from rt_lidar.kernels.xp import cupy_available
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.beam_full import REASONS, beam_summary
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.frame_loop import Pipeline, Sensed
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import load_preset
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer
from rt_lidar.unreal_bridge.world import World, street_scene

NO_CUDA = pytest.mark.skipif(not cupy_available(), reason="no CUDA device")
DEVICES = ["cpu", "cuda-source-on-cpu", pytest.param("cuda", marks=NO_CUDA)]
FULL_DUAL = BeamConfig(return_mode="dual", full=True)
SCANS = 3
SLOW_CONSUMER_S = 0.05
"""How long the slow consumer holds each frame: the threads cast the frames ahead meanwhile."""
COUNTED = ("pulses", "bundled_pulses", "bundled_share", "bundled_by_reason")


def _counts(summary: dict[str, Any]) -> dict[str, Any]:
    assert summary["mode"] == "full"
    return {k: summary[k] for k in COUNTED}


def _handed_on(hits: list[Hits]) -> dict[str, int]:
    """Pulses and bundled pulses of the frames the loop handed on, from their hits themselves."""
    bundled = sum(0 if h.bundle is None else len(h.bundle.pulses) for h in hits)
    return {"pulses": sum(h.pulses for h in hits), "bundled_pulses": bundled}


def _run(pipe: Pipeline, delay_s: float) -> tuple[dict[str, Any], list[Hits]]:
    """``SCANS`` scans of ``pipe`` (closed after), each frame held ``delay_s`` by the loop's consumer:
    the beam section of the summary and the hits of the frames handed on."""
    sensed: list[Hits] = []

    def consume(frame: Sensed) -> None:
        sensed.append(frame.hits)
        time.sleep(delay_s)

    pipe.on_sensed = consume
    try:
        pipe.scans(SCANS)
    finally:
        pipe.close()
    return beam_summary(pipe), sensed


def _in_process(device: str, prefetch: int, delay_s: float) -> tuple[dict[str, Any], list[Hits]]:
    config = RunConfig(preset="VLP-16", seed=3, in_process=True, beam=FULL_DUAL, device=device)
    pipe = in_process_pipeline(config, load_preset("VLP-16")).pipeline
    pipe.prefetch = prefetch  # before its first frame: the threads that cast ahead are not started yet
    return _run(pipe, delay_s)


@pytest.mark.parametrize("device", DEVICES)
def test_the_counts_are_the_delivered_frames_however_far_ahead_they_were_cast(device: str) -> None:
    alone, alone_frames = _in_process(device, prefetch=0, delay_s=0.0)
    ahead, ahead_frames = _in_process(device, prefetch=3, delay_s=SLOW_CONSUMER_S)
    assert len(ahead_frames) == len(alone_frames) > SCANS
    assert _counts(ahead) == _counts(alone)
    for summary, frames in ((alone, alone_frames), (ahead, ahead_frames)):
        assert {k: summary[k] for k in ("pulses", "bundled_pulses")} == _handed_on(frames)
        assert 0 < summary["bundled_pulses"] < summary["pulses"]
        assert set(summary["bundled_by_reason"]) == set(REASONS)
        assert summary["bundled_share"] == summary["bundled_pulses"] / summary["pulses"]


def _bridged(ask_depth: int, delay_s: float) -> tuple[dict[str, Any], list[Hits]]:
    preset = load_preset("VLP-16")
    server = AirSimServer(EmbeddedSim(World(street_scene(0)), preset, paused=True), port=0)
    server.start()
    try:
        with AirSimClient(port=server.port) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            pipe = bridge_pipeline(source, 20.0, seed=3, beam=FULL_DUAL, ask_depth=ask_depth)
            return _run(pipe, delay_s)
    finally:
        server.close()


def test_the_bridged_counts_are_the_delivered_frames_and_the_in_process_ones() -> None:
    """Over the bridge the frame loop decodes the next frame's answer while the consumer holds this one
    (and the server casts ``ask_depth`` frames ahead): the counts are still those of the frames handed
    on, and those of the same frames in-process."""
    paced, paced_frames = _bridged(ask_depth=1, delay_s=0.0)
    ahead, ahead_frames = _bridged(ask_depth=3, delay_s=SLOW_CONSUMER_S)
    assert len(ahead_frames) == len(paced_frames) > SCANS
    assert _counts(ahead) == _counts(paced)
    assert {k: ahead[k] for k in ("pulses", "bundled_pulses")} == _handed_on(ahead_frames)
    world = street_scene(0)  # the server's world
    direct = build_pipeline("VLP-16", world, sim_hz=20.0, seed=3, physics=PhysicsConfig(beam=FULL_DUAL))
    in_process, _ = _run(direct.pipeline, 0.0)
    assert _counts(paced) == _counts(in_process)
