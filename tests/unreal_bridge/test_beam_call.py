"""The extension ``rtLidarGetBeamHits`` on the wire: request map (sub-rays, sun), server binding, absence,
refusals."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from backend_fixture import PlaneBackend

from rt_lidar.unreal_bridge import AirSimClient, AirSimServer, LidarHits
from rt_lidar.unreal_bridge.beam_call import (
    BEAM_HITS_METHOD,
    SCENE_SUN,
    SunRequest,
    decode_beam,
    decode_sun,
    encode_beam,
)
from rt_lidar.unreal_bridge.errors import RpcError, WireFormatError

SUN_FLU = (0.48, -0.6, 0.64)  # a unit vector towards the sun (x fwd, y left, z up)
OFFSETS = np.array([[0.0, 0.0], [1.5e-3, -2.5e-4], [-1.2345678901e-3, 7e-4]])
WEIGHTS = np.array([0.5, 0.3, 0.2], np.float32)


@dataclass
class BeamBackend(PlaneBackend):
    """The plane backend that also answers sub-ray bundles: 3 rows a ray, the bundle in ``info``."""

    beams: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    suns: list[SunRequest | None] = field(default_factory=list)

    def lidar_beam_hits(
        self, lidar_name: str, vehicle_name: str, offsets_rad: np.ndarray, weights: np.ndarray, **kw
    ) -> LidarHits:
        self.beams.append((offsets_rad, weights))
        self.suns.append(kw.pop("sun", "not passed"))
        one = self.lidar_hits(lidar_name, vehicle_name)
        n = len(weights)
        rep = {k: np.repeat(getattr(one, k), n, axis=0) for k in ("points", "normals", "segmentation")}
        rep |= {k: np.repeat(getattr(one, k), n) for k in ("ring", "time", "range", "miss")}
        info = {"sub_rays": n, "subray_weights": [float(w) for w in weights]}
        sun = self.suns[-1]
        if isinstance(sun, SunRequest):
            info["sun_direction"] = list(sun.direction or SUN_FLU)
            rows = len(rep["ring"])
            sun_cos = np.full(rows, 0.25, np.float32)
            rep["extras"] = {
                **one.extras,
                "sun_cos": sun_cos,
                "beam_sun_cos": np.linspace(-1, 1, rows, dtype=np.float32),
            }
        return replace(one, **rep, info=info)


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


# -- the sun entry -----------------------------------------------------------------------------------------

SUN_ODD = np.array([0.1, 0.2, 0.3]) / np.linalg.norm([0.1, 0.2, 0.3])  # no exact binary fractions


def test_the_sun_goes_ned_on_the_wire_and_comes_back_exact():
    beam = encode_beam(OFFSETS, WEIGHTS, SUN_ODD)
    assert beam["sun"]["direction"] == [SUN_ODD[0], -SUN_ODD[1], -SUN_ODD[2]]  # NED, float64
    assert decode_sun(beam) == SunRequest(tuple(SUN_ODD.tolist()))
    assert decode_sun(encode_beam(OFFSETS, WEIGHTS)) is None
    scene = encode_beam(sun=SCENE_SUN)
    assert scene == {"sun": {}} and decode_sun(scene) == SunRequest(None)
    off, w = decode_beam(scene)  # a sun without sub-rays: one ray along the pulse
    np.testing.assert_array_equal(off, np.zeros((1, 2)))
    np.testing.assert_array_equal(w, np.ones(1, np.float32))


@pytest.mark.parametrize(
    "sun",
    [
        [],
        {"direction": [1.0, 0.0]},
        {"direction": [2.0, 0.0, 0.0]},
        {"direction": [float("nan"), 0, 1]},
        {"direction": ["1", 0, 0]},
        {"direction": [True, 0, 0]},
        {"direction": 1.0},
    ],
)
def test_bad_suns_are_refused(sun):
    with pytest.raises(WireFormatError, match=f"{BEAM_HITS_METHOD}: sun"):
        decode_sun({"sun": sun})


@pytest.mark.parametrize("sun", ["moon", [2.0, 0.0, 0.0], [float("nan"), 0.0, 1.0], [1.0, 0.0]])
def test_the_client_sends_no_bad_sun(sun):
    with pytest.raises(ValueError, match="sun must be"):
        encode_beam(OFFSETS, WEIGHTS, sun)
    with pytest.raises(ValueError, match="sub-rays or a sun"):
        encode_beam()


def test_the_server_passes_the_sun_only_when_asked_and_answers_its_fields(client, beam_backend):
    plain = client.rt_lidar_get_beam_hits("", "", OFFSETS, WEIGHTS)
    assert beam_backend.suns == ["not passed"] and "sun_cos" not in plain.extras  # as before the sun
    hits = client.rt_lidar_get_beam_hits("", "", OFFSETS, WEIGHTS, SUN_FLU)
    assert beam_backend.suns[-1] == SunRequest(SUN_FLU)
    rows = 3 * beam_backend.n_points
    assert hits.extras["sun_cos"].shape == hits.extras["beam_sun_cos"].shape == (rows,)
    np.testing.assert_array_equal(hits.extras["beam_sun_cos"], np.linspace(-1, 1, rows, dtype=np.float32))
    # NED on the wire (float32, as every float of an answer), the project frame again here
    assert hits.info["sun_direction"] == pytest.approx(SUN_FLU, abs=1e-7)
    client.rt_lidar_get_beam_hits("", "", sun=SCENE_SUN)
    assert beam_backend.suns[-1] == SunRequest(None) and beam_backend.beams[-1][1].tolist() == [1.0]
    with pytest.raises(RpcError, match=r"sun\.direction must be a unit vector") as err:
        client.call(BEAM_HITS_METHOD, "", "", {"sun": {"direction": [0.0, 0.0, 0.0]}})
    assert not err.value.unbound and len(beam_backend.suns) == 3
