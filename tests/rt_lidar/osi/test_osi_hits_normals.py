"""``WorldSource.keep_normals`` (what the osi-sensorview sink turns on) adds the surface normals and
changes nothing else of the hits."""

from __future__ import annotations

import numpy as np

from rt_lidar.pipeline.builder import build_pipeline


def test_keep_normals_adds_normals_and_changes_no_hit():
    plain = build_pipeline("VLP-16", "street", seed=0).pipeline
    kept = build_pipeline("VLP-16", "street", seed=0).pipeline
    kept.source.keep_normals = True
    glass_rays = 0
    for _ in range(2):
        a, b = plain.sense(), kept.sense()
        plain.commit(a)
        kept.commit(b)
        assert a.hits.normal is None and b.hits.normal is not None
        fields = ("range_m", "cos_incidence", "material", "segment", "glass_range_m", "glass_transmission")
        for name in fields:
            assert np.array_equal(getattr(a.hits, name), getattr(b.hits, name)), name
        assert np.array_equal(a.result.points, b.result.points)
        hit = np.isfinite(b.hits.range_m)
        glass_rays += int(np.count_nonzero(b.hits.glass_material >= 0))
        n = b.hits.normal[hit].astype(np.float64)
        n /= np.linalg.norm(n, axis=1)[:, None]
        # world-frame normals facing the ray: the street's ego does not turn, so the sensor frame is the
        # world's and |cos| is the hits' incidence cosine
        cos = -np.einsum("ij,ij->i", n, b.hits.direction[hit].astype(np.float64))
        assert np.all(cos >= -1e-6)
        assert np.allclose(cos, b.hits.cos_incidence[hit], atol=1e-5)
        # a miss met no surface, or went through glass into nothing (a hollow car): the glass's normal
        assert not b.hits.normal[~hit & (b.hits.glass_material < 0)].any()
        through = ~hit & (b.hits.glass_material >= 0)
        assert np.all(np.linalg.norm(b.hits.normal[through], axis=1) > 0.5)
    assert glass_rays > 0  # the rays through the cars' windows went through the normals' path too
