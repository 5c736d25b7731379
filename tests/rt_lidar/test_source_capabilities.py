"""The frame loop schedules a source by what its ``Capabilities`` state, not by its class."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.frame_loop import CAST_AHEAD, Pipeline, frame_workers
from rt_lidar.pipeline.sources import Capabilities, WorldSource

ROOT = Path(__file__).resolve().parents[2]


class Delegating:
    """Not a WorldSource: casts through one and states what it states (or less)."""

    def __init__(self, inner: WorldSource, capabilities: Capabilities) -> None:
        self.inner = inner
        self.capabilities = capabilities
        self.cast_threads: int | None = None

    @property
    def material_names(self) -> list[str]:
        return self.inner.material_names

    def use_beam(self, pattern, sun=None):
        return self.inner.use_beam(pattern, sun)

    def hits(self, firings, t0_ns, t1_ns):
        self.inner.cast_threads = self.cast_threads
        return self.inner.hits(firings, t0_ns, t1_ns)


def _source(frames_in_any_order: bool) -> tuple[Delegating, Pipeline]:
    built = build_pipeline("HDL-64E", "street", seed=4)
    world_source = built.pipeline.source
    assert isinstance(world_source, WorldSource)
    caps = dataclasses.replace(world_source.capabilities, frames_in_any_order=frames_in_any_order)
    src = Delegating(world_source, caps)
    pipe = Pipeline(built.preset, src, built.pipeline.physics, sim_hz=20.0, seed=4, prefetch=CAST_AHEAD)
    return src, pipe


def test_a_source_stating_frames_in_any_order_is_cast_on_several_threads() -> None:
    src, pipe = _source(True)
    assert frame_workers(src, CAST_AHEAD, 70_000) >= 2
    try:
        pipe.scans(1)
        assert src.cast_threads == 1  # one thread a frame, the frames side by side
    finally:
        pipe.close()


def test_a_source_not_stating_it_is_fetched_in_order() -> None:
    src, pipe = _source(False)
    assert frame_workers(src, CAST_AHEAD, 70_000) == 1
    try:
        pipe.scans(1)
        assert src.cast_threads is None
    finally:
        pipe.close()


def test_the_frame_loop_and_builder_ask_no_source_for_its_class() -> None:
    """No ``isinstance(..., <a source class>)`` in the frame loop or the builder."""
    sources = {"WorldSource", "BridgeSource", "CarlaSource"}
    for rel in ("rt_lidar/pipeline/frame_loop.py", "rt_lidar/pipeline/builder.py"):
        tree = ast.parse((ROOT / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                assert not names & sources, f"{rel}:{node.lineno} asks for a source's class"
