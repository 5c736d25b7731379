"""The extension ``rtLidarGetBeamHits`` on the wire: request map, server binding, absence, refusals."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from backend_fixture import PlaneBackend

from unreal_bridge import AirSimClient, AirSimServer, LidarHits
from unreal_bridge.beam_call import BEAM_HITS_METHOD, decode_beam, encode_beam
from unreal_bridge.errors import RpcError, WireFormatError

OFFSETS = np.array([[0.0, 0.0], [1.5e-3, -2.5e-4], [-1.2345678901e-3, 7e-4]])
WEIGHTS = np.array([0.5, 0.3, 0.2], np.float32)


@dataclass
class BeamBackend(PlaneBackend):
    """The plane backend that also answers sub-ray bundles: 3 rows a ray, the bundle in ``info``."""

    beams: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    def lidar_beam_hits(
        self, lidar_name: str, vehicle_name: str, offsets_rad: np.ndarray, weights: np.ndarray
    ) -> LidarHits:
        self.beams.append((offsets_rad, weights))
        one = self.lidar_hits(lidar_name, vehicle_name)
        n = len(weights)
        rep = {k: np.repeat(getattr(one, k), n, axis=0) for k in ("points", "normals", "segmentation")}
        rep |= {k: np.repeat(getattr(one, k), n) for k in ("ring", "time", "range", "miss")}
        return replace(one, **rep, info={"sub_rays": n, "subray_weights": [float(w) for w in weights]})


@pytest.fixture
def beam_backend() -> BeamBackend:
    return BeamBackend(n_points=1_000)


@pytest.fixture
def client(beam_backend: BeamBackend) -> Iterator[AirSimClient]:
    with AirSimServer(beam_backend, port=0) as server:
        server.start()
        with AirSimClient(port=server.port, timeout=10) as c:
            yield c


def test_request_map_round_trips_exactly():
    beam = encode_beam(OFFSETS, WEIGHTS)
    assert set(beam) == {"sub_rays"} and len(beam["sub_rays"]["offsets_rad"]) == 3
    off, w = decode_beam(beam)
    assert off.dtype == np.float64 and w.dtype == np.float32
    np.testing.assert_array_equal(off, OFFSETS)
    np.testing.assert_array_equal(w, WEIGHTS)


@pytest.mark.parametrize(
    "beam",
    [
        None,
        {"sub_rays": []},
        {"sub_rays": {"offsets_rad": [[0.0, 0.0]], "weights": [0.5, 0.5]}},
        {"sub_rays": {"offsets_rad": [[0.0]], "weights": [1.0]}},
        {"sub_rays": {"offsets_rad": [[0.0, "x"]], "weights": [1.0]}},
        {"sub_rays": {"offsets_rad": [[0.0, float("nan")]], "weights": [1.0]}},
        {"sub_rays": {"offsets_rad": [], "weights": []}},
    ],
)
def test_bad_request_maps_are_refused(beam):
    with pytest.raises(WireFormatError, match=BEAM_HITS_METHOD):
        decode_beam(beam)


def test_the_server_passes_the_bundle_and_answers_every_sub_ray(client, beam_backend):
    hits = client.rt_lidar_get_beam_hits("", "", OFFSETS, WEIGHTS)
    ((off, w),) = beam_backend.beams
    np.testing.assert_array_equal(off, OFFSETS)  # float64 on the wire: exact
    np.testing.assert_array_equal(w, WEIGHTS)
    assert hits.ring.shape == (3 * beam_backend.n_points,) and hits.info["sub_rays"] == 3
    np.testing.assert_array_equal(np.asarray(hits.info["subray_weights"], np.float32), WEIGHTS)
    # the 2-argument call is what it was: one row a ray, no sub-ray header
    plain = client.rt_lidar_get_hits()
    assert plain.ring.shape == (beam_backend.n_points,) and "sub_rays" not in plain.info


def test_a_bad_bundle_is_answered_with_an_error_and_the_connection_stays(client, beam_backend):
    with pytest.raises(RpcError, match="same count") as err:
        client.call(BEAM_HITS_METHOD, "", "", {"sub_rays": {"offsets_rad": [[0, 0]], "weights": [1, 2]}})
    assert not err.value.unbound and not beam_backend.beams
    with pytest.raises(RpcError) as arity:
        client.call(BEAM_HITS_METHOD, "", "")
    assert arity.value.unbound  # rpclib's arity error
    assert client.rt_lidar_get_beam_hits("", "", OFFSETS, WEIGHTS).info["sub_rays"] == 3


def test_a_backend_without_bundles_does_not_bind_the_call():
    with AirSimServer(PlaneBackend(n_points=100), port=0) as server:
        server.start()
        with AirSimClient(port=server.port, timeout=10) as c:
            with pytest.raises(RpcError, match="could not find function 'rtLidarGetBeamHits'") as err:
                c.rt_lidar_get_beam_hits("", "", OFFSETS, WEIGHTS)
            assert err.value.unbound
            assert c.rt_lidar_get_hits().ring.shape == (100,)
