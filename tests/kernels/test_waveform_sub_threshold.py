"""An echo far below the detection threshold still moves a return it shares a cluster with: why no bound
on a glass ghost's power lets the caster skip its mirror ray and keep the scans' bytes (issue 43,
docs/performance.md "Issue 43, session 25: glass rays")."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.kernels.waveform import pulse_sigma_ns, waveform_returns

THRESHOLD_W = 1e-7
WIDTH_NS = 5.0


def _returns(ghost_w: float, gap_sigmas: float) -> tuple[np.ndarray, ...]:
    """A pulse's returns: an object's echo 8x the threshold at 100 ns and a faint echo behind it."""
    t = np.array([[100.0, 100.0 + gap_sigmas * pulse_sigma_ns(WIDTH_NS)]])
    a = np.array([[8.0 * THRESHOLD_W, ghost_w]], np.float32)
    r = waveform_returns(t, a, WIDTH_NS, THRESHOLD_W, "two_strongest", 2.0, 2)
    return r.t_ns, r.amp, r.epw_ns


@pytest.mark.parametrize("share", [1e-3, 1e-4])
def test_an_echo_far_below_the_threshold_moves_a_return_in_its_cluster(share: float) -> None:
    with_ghost, without = _returns(share * THRESHOLD_W, 2.0), _returns(0.0, 2.0)
    assert len(with_ghost[0]) == len(without[0]) == 1  # no return of its own
    assert with_ghost[0][0] != without[0][0]  # but the object's return moved (its time's bits)


def test_a_faint_echo_in_a_cluster_of_its_own_changes_nothing() -> None:
    far = _returns(1e-4 * THRESHOLD_W, 12.0)  # more than the 6-sigma cluster gap away
    assert all(np.array_equal(x, y) for x, y in zip(far, _returns(0.0, 12.0), strict=True))
