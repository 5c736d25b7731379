"""A run that stops after a number of scans fetches no frame past its last one ahead
(``Pipeline.fetch_until``, ``Pipeline.last_frame_for``): the frame loop's threads do not cast and sense
frames that no scan will hold, and the scans are the same as without the limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.pipeline.scan_loop import run_scans
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.model import load_rig
from rt_lidar.rig.run import drive_rig

RIG = Path(__file__).resolve().parents[2] / "docs" / "rigs" / "roof-and-corners.toml"


def _counting(pipeline: Pipeline) -> list[int]:
    """The frames ``pipeline``'s source is asked for, in the order asked."""
    asked: list[int] = []
    fetch = pipeline._fetch

    def counted(k: int):  # type: ignore[no-untyped-def]
        asked.append(k)
        return fetch(k)

    pipeline._fetch = counted  # type: ignore[method-assign]
    return asked


@pytest.mark.parametrize(
    ("preset", "sim_hz", "scans"), [("VLP-16", 20.0, 3), ("VLP-16", 7.0, 2), ("OS1-64", 33.0, 2)]
)
def test_the_last_frame_is_the_one_that_hands_out_the_last_scan(
    preset: str, sim_hz: float, scans: int
) -> None:
    pipe = build_pipeline(preset, build_world("street", seed=3), sim_hz=sim_hz).pipeline
    for more in range(1, scans + 1):
        want = pipe.last_frame_for(more)
        got = 0
        while got < more:
            got += len(pipe.step())
        assert pipe.frame - 1 == want, f"{more} scans: handed out by frame {pipe.frame - 1}, predicted {want}"


def test_a_run_fetches_no_frame_past_its_last_and_its_scans_are_the_same() -> None:
    world = build_world("street", seed=3)
    ahead = build_pipeline("VLP-16", world, seed=3, prefetch=3).pipeline
    asked = _counting(ahead)
    ahead.start()
    try:
        got: list[bytes] = []
        stats = run_scans(ahead, 3, on_scan=lambda s: got.append(s.points.tobytes()))
    finally:
        ahead.close()
    assert stats.scans == 3
    assert sorted(asked) == list(range(ahead.frame)), "every frame stepped, and none past the last"
    plain = build_pipeline("VLP-16", world, seed=3).pipeline  # no frame fetched ahead
    assert [s.points.tobytes() for s in plain.scans(3)] == got


def test_a_rig_fetches_no_frame_past_its_last(tmp_path: Path) -> None:
    loop = RigLoop(load_rig(RIG), build_world("street", seed=3), seed=3, prefetch=True, crosstalk=True)
    asked = {n: _counting(u.pipeline) for n, u in loop.units.items()}
    try:
        drive_rig(loop, 2, tmp_path / "rig")
    finally:
        loop.close()
    for name, frames in asked.items():
        assert sorted(frames) == list(range(loop.frame)), name
