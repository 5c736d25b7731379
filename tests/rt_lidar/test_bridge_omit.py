"""A controller that makes its hits from the optional fields asks our server to leave ``point`` and
``normal`` out of each answer (``omit``, offered in ``rtLidarServerInfo``): 1.6 MB less a HDL-64E frame
to pack, send, receive and flip, and every other field the same bytes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scenes import wall_scene
from served import served, served_frames, server_of_before

from rt_lidar.bridge.source import BridgeSource
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import schedule_digest
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer, LidarHits, RpcError
from rt_lidar.unreal_bridge.beam_call import BEAM_HITS_METHOD
from rt_lidar.unreal_bridge.errors import WireFormatError
from rt_lidar.unreal_bridge.hits_codec import decode_hits
from rt_lidar.unreal_bridge.wire import LEAN_FIELDS, OMITTABLE_FIELDS
from rt_lidar.unreal_bridge.world import World, street_scene

_OMIT = {"omit": sorted(OMITTABLE_FIELDS)}


def _frames(omit: bool, shared_memory: bool = False) -> list[LidarHits]:
    """Three lockstep frames of a fresh server, asked with or without ``omit``."""

    def ask(client: AirSimClient) -> None:
        if omit:
            client.omit_fields = OMITTABLE_FIELDS

    return served_frames(ask, shared_memory=shared_memory)


@pytest.mark.parametrize("shared_memory", [False, True])
def test_an_answer_without_points_and_normals_has_every_other_field_bit_for_bit(shared_memory: bool) -> None:
    full, lean = _frames(omit=False), _frames(omit=True, shared_memory=shared_memory)
    for a, b in zip(full, lean, strict=True):
        assert len(a.ring) > 1000 and float(np.abs(a.points).max()) > 1.0
        for name in ("segmentation", "ring", "time", "range", "miss"):
            assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
        assert a.extras.keys() == b.extras.keys()
        for name, value in a.extras.items():
            assert value.tobytes() == b.extras[name].tobytes(), name
        assert a.info == b.info and a.time_stamp == b.time_stamp
        assert not b.points.any() and not b.normals.any()
        assert b.points.shape == a.points.shape and b.normals.shape == a.normals.shape


def test_the_server_leaves_the_fields_out_of_the_message_and_says_so() -> None:
    with served() as (_sim, server), AirSimClient(port=server.port) as client:
        info = client.rt_lidar_server_info()
        assert info["omit"] == ["direction", "normal", "point", "ring", "time"]
        assert info["firings"] == {
            "Lidar1": schedule_digest(load_preset("VLP-16")),
            "": info["firings"]["Lidar1"],
        }
        client.sim_continue_for_time(0.05)
        raw: Any = client.rpc.call("rtLidarGetHits", "", "", _OMIT)
        assert raw["omitted"] == ["normal", "point"]
        assert "point" not in raw["fields"] and "normal" not in raw["fields"]
        assert {"range", "ring", "time", "direction", "cos_incidence"} <= raw["fields"].keys()
        beam: Any = client.rpc.call(BEAM_HITS_METHOD, "", "", {"omit": ["point"]})  # a plain cast too
        assert beam["omitted"] == ["point"] and "normal" in beam["fields"]
        plain: Any = client.rpc.call("rtLidarGetHits", "", "")
        assert "omitted" not in plain and {"point", "normal"} <= plain["fields"].keys()


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            {"omit": ["range"]},
            "field 'range' cannot be omitted (allowed: direction, normal, point, ring, time)",
        ),
        ({"omit": "point"}, "'omit' must be a list of field names"),
        ({"omit": [1]}, "'omit' must be a list of field names"),
        ({"fields": ["point"]}, "options must be a map with at most 'omit' and 'compact'"),
        ([["point"]], "options must be a map with at most 'omit' and 'compact'"),
    ],
)
def test_a_bad_omit_option_is_refused_naming_what_is_wrong(options: Any, said: str) -> None:
    with served() as (_sim, server), AirSimClient(port=server.port) as client:
        with pytest.raises(RpcError, match="rtLidarGetHits") as err:
            client.rpc.call("rtLidarGetHits", "", "", options)
        assert said in str(err.value)
        with pytest.raises(RpcError, match="cannot be omitted"):
            client.rpc.call(BEAM_HITS_METHOD, "", "", {"omit": ["miss"]})
        assert client.ping()  # the connection stays


def test_an_answer_that_leaves_out_fields_not_asked_for_is_refused() -> None:
    with served() as (_sim, server), AirSimClient(port=server.port) as client:
        client.sim_continue_for_time(0.05)
        raw: Any = client.rpc.call("rtLidarGetHits", "", "", {"omit": ["normal"]})
    with pytest.raises(WireFormatError, match="leaves out"):
        decode_hits(raw)
    assert not decode_hits(raw, omit=frozenset({"normal"})).normals.any()
    with pytest.raises(WireFormatError, match="leaves out"):
        decode_hits({**raw, "omitted": ["normal", "range"]}, omit=OMITTABLE_FIELDS)


_WithoutOmit = server_of_before({"in_order": True})
"""A server of before the ``omit`` option (its ``rtLidarServerInfo`` does not offer it)."""


@pytest.mark.parametrize(
    ("server_type", "asked"),
    [(AirSimServer, LEAN_FIELDS), (_WithoutOmit, frozenset())],
)
def test_the_bridge_asks_to_leave_out_what_it_does_not_read_only_of_a_server_that_offers_it(
    server_type: type[AirSimServer], asked: frozenset[str]
) -> None:
    preset = load_preset("VLP-16")
    with (
        served(preset.name, server_type, wall_scene(12.0)) as (_sim, server),
        AirSimClient(port=server.port) as client,
    ):
        client.reset()
        source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
        assert source.stats.extension and source._in_order
        assert client.omit_for("") == asked and source.stats.omitted == sorted(asked)


def test_an_answer_whose_omitted_list_is_not_names_is_refused() -> None:
    with served() as (_sim, server), AirSimClient(port=server.port) as client:
        client.sim_continue_for_time(0.05)
        raw: Any = client.rpc.call("rtLidarGetHits", "", "", {"omit": ["normal"]})
    for bad in ([["normal"]], "normal", [1]):
        with pytest.raises(WireFormatError, match="leaves out"):
            decode_hits({**raw, "omitted": bad}, omit=OMITTABLE_FIELDS)


def test_the_embedded_sim_is_told_what_is_omitted_and_does_not_compute_it() -> None:
    """The server passes the omit on to a backend whose prepared hits take it: the embedded sim then
    leaves points and normals as zeros (never sent) and every other field is what it casts without."""
    from rt_lidar.unreal_bridge.casts import takes_omit

    assert takes_omit(EmbeddedSim(World(street_scene(0)), load_preset("VLP-16"), paused=True))
    runs: dict[bool, LidarHits] = {}
    for omit in (False, True):
        sim = EmbeddedSim(World(street_scene(0)), load_preset("VLP-16"), paused=True)
        sim.continue_for_time(0.05)
        runs[omit] = sim.prepare_lidar_hits("", "", omit=OMITTABLE_FIELDS if omit else frozenset()).run()
    full, lean = runs[False], runs[True]
    assert float(np.abs(full.points).max()) > 1.0 and float(np.abs(full.normals).max()) > 0.5
    assert not lean.points.any() and not lean.normals.any()
    assert lean.points.shape == full.points.shape and lean.normals.shape == full.normals.shape
    for name in ("segmentation", "ring", "time", "range", "miss"):
        assert getattr(full, name).tobytes() == getattr(lean, name).tobytes(), name
    for name, value in full.extras.items():
        assert value.tobytes() == lean.extras[name].tobytes(), name


class _OmitSpy(EmbeddedSim):
    """The embedded sim, recording the omit each prepared hits call was given."""

    told: list[frozenset[str]]

    def prepare_lidar_hits(
        self, lidar_name: str, vehicle_name: str, omit: frozenset[str] = frozenset()
    ) -> Any:
        self.told.append(omit)
        return super().prepare_lidar_hits(lidar_name, vehicle_name, omit)


class _NoOmit(EmbeddedSim):
    """A deferred backend whose prepared hits know no ``omit`` (as other people's may be)."""

    def prepare_lidar_hits(self, lidar_name: str, vehicle_name: str) -> Any:  # type: ignore[override]
        return super().prepare_lidar_hits(lidar_name, vehicle_name)


@pytest.mark.parametrize("shared_memory", [False, True])
def test_the_server_tells_a_backend_that_takes_it_and_not_one_that_does_not(shared_memory: bool) -> None:
    from rt_lidar.unreal_bridge.casts import takes_omit

    spy = _OmitSpy(World(street_scene(0)), load_preset("VLP-16"), paused=True)
    spy.told = []
    plain = _NoOmit(World(street_scene(0)), load_preset("VLP-16"), paused=True)
    assert takes_omit(spy) and not takes_omit(plain)
    answers: dict[str, LidarHits] = {}
    for name, backend in (("spy", spy), ("plain", plain)):
        server = AirSimServer(backend, port=0).start()
        try:
            with AirSimClient(port=server.port, shared_memory=shared_memory) as client:
                client.omit_fields = OMITTABLE_FIELDS
                client.sim_continue_for_time(0.05)
                answers[name] = client.rt_lidar_get_hits()
        finally:
            server.close()
    assert spy.told == [OMITTABLE_FIELDS]
    a, b = answers["spy"], answers["plain"]
    for name in ("segmentation", "ring", "time", "range", "miss"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
    assert a.extras.keys() == b.extras.keys()
