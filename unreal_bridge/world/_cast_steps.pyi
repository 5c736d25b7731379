"""Type stub of the compiled steps of World.cast (``_cast_steps.c``)."""

from typing import Any

def object_frame_rays(
    o: Any, d: Any, cand: Any, p: Any, q: Any, lo: Any, hi: Any, ol: Any, dl: Any, keep: Any, /
) -> int:
    """Candidate rays into the object frame and through its box test; returns how many were kept."""

def gather_faces(
    face: Any, normals: Any, material: Any, owner: Any, normal_out: Any, material_out: Any, owner_out: Any, /
) -> None:
    """The per-face rows of the static faces hit (face -1: the last row)."""

def face_the_rays(normal: Any, d: Any, obj_index: Any, segments: Any, segment_out: Any, /) -> None:
    """Normals turned to face their rays, and the segments of the objects hit."""

def bounds(o: Any, /) -> tuple[float, float, float, float, float, float]:
    """Per-axis min and max of (N, 3) float32 rows."""

def cone_candidates(d: Any, u: Any, cos_min: Any, out: Any, /) -> int:
    """The rays whose direction lies in a cone, their indices written to out; returns how many."""

def swept_box(p: Any, q: Any, corners: Any, out: Any, /) -> None:
    """World bounds of an object's box corners over sampled poses, grown by their longest step."""

def swept_sphere(p: Any, q: Any, center: Any, out: Any, /) -> None:
    """An object's centre over sampled poses: the midpoint of its bounds, the farthest sample from it
    and the longest step between samples, into ``out`` (5,) (MovingObjects' NumPy lines' bits)."""

def box_candidates(o: Any, d: Any, cand: Any, lo: Any, hi: Any, out: Any, /) -> int:
    """Of the candidate rays, those whose forward half meets a box, into out; returns how many."""

def interp_sorted(t: Any, xp: Any, fp: Any, slopes: Any, out: Any, cols: int, /) -> None:
    """np.interp of every column of fp at times t in order (ValueError naming the first out of order)."""

def merge_hits(
    cand: Any,
    q: Any,
    hd: Any,
    hf: Any,
    hn: Any,
    limit: Any,
    face_material: Any,
    index: int,
    dist: Any,
    normal: Any,
    material: Any,
    obj_index: Any,
    /,
) -> int:
    """A moving object's hits written into the batch's rows; returns how many."""

def sphere_candidates(o: Any, d: Any, c: Any, r2: Any, out: Any, /) -> int:
    """The rays whose forward half comes near a sphere, their indices written to out; returns how many."""
