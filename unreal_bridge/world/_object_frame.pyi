"""Type stub of the compiled moving-object ray transform (``_object_frame.c``)."""

from typing import Any

def object_frame_rays(
    o: Any, d: Any, cand: Any, p: Any, q: Any, lo: Any, hi: Any, ol: Any, dl: Any, keep: Any, /
) -> int:
    """Candidate rays into the object frame and through its box test; returns how many were kept."""
