import numpy as np

from rt_lidar.kernels import scan_boundaries


def test_runs_of_scan_index():
    idx, starts = scan_boundaries(np.array([3, 3, 4, 4, 4, 6], np.int64))
    assert idx.tolist() == [3, 4, 6]
    assert starts.tolist() == [0, 2, 5, 6]
    idx, starts = scan_boundaries(np.zeros(0, np.int64))
    assert idx.size == 0 and starts.tolist() == [0]
