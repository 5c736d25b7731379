"""Type stub of the compiled steps of WorldSource (``_source_steps.c``)."""

from typing import Any

def first_surfaces(*arrays: Any) -> int:
    """The per-ray fields after the first surfaces, and the rays that pass glass; returns how many."""

def rotate_f32(q: Any, v: Any, out: Any, /) -> None:
    """Directions rotated by quaternions (one, or one a row), float32."""

def glass_step(*arrays_and_limits: Any) -> int:
    """One round of the rays behind glass: their ends written, the rays that go on; returns how many."""

def glass_mirror_rays(*arrays_and_eps: Any) -> None:
    """The mirror rays off the first panes of rays ``rows``: start points, unit directions, distances."""

def mirror_hits(*arrays_and_limit: Any) -> None:
    """What the mirror rays met, scattered into every ray's range, cosine, material and segment."""

def join_scan(
    parts: Any, out: Any, itemsize: int, t_offset: int, return_id_offset: int, start: int, /
) -> int:
    """The parts' records into ``out``, each int64 time less ``start``; returns how many have return id 0."""

def interp_sorted(t: Any, xp: Any, fp: Any, slopes: Any, out: Any, cols: int, /) -> None:
    """np.interp of every column of fp at times t in order."""
