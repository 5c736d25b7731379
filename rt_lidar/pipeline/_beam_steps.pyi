"""Type stub of a bundle's sub-rays in one pass (``_beam_steps.c``)."""

from typing import Any

def bundle_rays(
    d: Any,
    th: Any,
    tv: Any,
    oh: Any,
    ov: Any,
    pos: Any,
    quat: Any,
    p: int,
    n: int,
    nominal_exact: int,
    with_exit: int,
    dir_out: Any,
    pos_out: Any,
    quat_out: Any,
    /,
) -> None:
    """The sub-ray directions, start points and poses of bundles of n sub-rays."""

def bundle_rows(
    d: Any,
    th: Any,
    tv: Any,
    oh: Any,
    ov: Any,
    pos: Any,
    quat: Any,
    pulse: Any,
    sub: Any,
    p: int,
    n: int,
    r: int,
    nominal_exact: int,
    with_exit: int,
    dir_out: Any,
    pos_out: Any,
    quat_out: Any,
    /,
) -> None:
    """Rows pulse * n + sub of what bundle_rays gives, made alone."""
