"""Compact hits answers (``compact``, offered in ``rtLidarServerInfo``): narrow integers in their own
width and the glass fields only at the rows of rays that crossed glass. Decoded, every field is the
plain answer's, bit for bit; a HDL-64E frame of the street takes under half the bytes; a malformed one
is refused naming what is wrong."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from served import served, served_frames, server_of_before

from rt_lidar.bridge.hits import hits_from_wire
from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer, LidarHits, RpcError
from rt_lidar.unreal_bridge.beam_call import BEAM_HITS_METHOD
from rt_lidar.unreal_bridge.compact import GLASS_FIELDS, GLASS_ROWS, glass_rows
from rt_lidar.unreal_bridge.errors import WireFormatError
from rt_lidar.unreal_bridge.hits_codec import decode_hits, encode_hits
from rt_lidar.unreal_bridge.rpc import pack
from rt_lidar.unreal_bridge.wire import LEAN_FIELDS, FluPose
from rt_lidar.unreal_bridge.world import World, street_scene


def _frames(compact: bool, shared_memory: bool = False) -> list[LidarHits]:
    """Three lockstep HDL-64E frames of a fresh server, asked compact or plain."""

    def ask(client: AirSimClient) -> None:
        client.compact = compact

    return served_frames(ask, "HDL-64E", shared_memory)


@pytest.mark.parametrize("shared_memory", [False, True])
def test_a_compact_answer_decodes_to_the_plain_answer_s_values(shared_memory: bool) -> None:
    plain, compact = _frames(False), _frames(True, shared_memory)
    for a, b in zip(plain, compact, strict=True):
        assert int((a.extras["glass_material"] >= 0).sum()) > 100  # rays really crossed glass
        for name in ("points", "normals", "segmentation", "ring", "time", "range", "miss"):
            assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
        assert a.extras.keys() == b.extras.keys()
        for name, value in a.extras.items():
            other = b.extras[name]
            assert other.shape == value.shape and np.array_equal(value, other, equal_nan=True), name
            assert np.signbit(value).tolist() == np.signbit(other).tolist(), name
        assert b.extras["material"].dtype == np.int16 and b.extras["glass_segment"].dtype == np.uint32
        assert a.info == b.info and a.time_stamp == b.time_stamp


def test_the_hits_the_physics_gets_are_the_same_bytes_and_the_answer_under_half() -> None:
    """hits_from_wire of the plain and the compact encoding of one lean frame: every field of the Hits
    the same bytes; the compact message under half the plain one."""
    preset = load_preset("HDL-64E")
    sim = EmbeddedSim(World(street_scene(0)), preset, paused=True)
    for _ in range(3):
        sim.continue_for_time(0.05)
    wire_hits = sim.prepare_lidar_hits("", "", omit=LEAN_FIELDS).run()
    expected = firings_between(preset, int(wire_hits.info["t0_ns"]), int(wire_hits.info["t1_ns"]))
    answers = {c: encode_hits(wire_hits, omit=LEAN_FIELDS, compact=c) for c in (False, True)}
    sizes = {c: len(pack(a)) for c, a in answers.items()}
    assert sizes[True] < 0.5 * sizes[False], sizes
    assert answers[True]["compact"] is True and "compact" not in answers[False]
    rows = answers[True]["fields"][GLASS_ROWS]["shape"][0]
    assert 0 < rows < 0.3 * wire_hits.range.size
    hits = {
        c: hits_from_wire(decode_hits(a, omit=LEAN_FIELDS), expected=expected) for c, a in answers.items()
    }
    for name, value in vars(hits[False]).items():
        if isinstance(value, np.ndarray):
            assert value.tobytes() == getattr(hits[True], name).tobytes(), name


def _answer_with(glass: dict[str, np.ndarray]) -> LidarHits:
    n = glass["glass_range"].size
    return LidarHits(
        points=np.zeros((n, 3), np.float32),
        normals=np.zeros((n, 3), np.float32),
        segmentation=np.full(n, -1, np.int32),
        ring=np.zeros(n, np.uint16),
        time=np.arange(n, dtype=np.int64),
        range=np.full(n, np.nan, np.float32),
        miss=np.ones(n, bool),
        pose=FluPose(),
        time_stamp=0,
        extras={"material": np.full(n, -1, np.int16), **glass},
    )


def test_every_bit_of_the_glass_fields_comes_back() -> None:
    """Rows where only one field differs from its absent value, in its last bit, by its sign (-0.0) or
    as a NaN are sent; the others read the absent values."""
    n = 40
    glass = {
        "glass_range": np.full(n, np.inf, np.float32),
        "glass_cos": np.zeros(n, np.float32),
        "glass_material": np.full(n, -1, np.int16),
        "glass_segment": np.zeros(n, np.uint32),
        "glass_transmission": np.ones(n, np.float32),
    }
    glass["glass_range"][3] = 7.5
    glass["glass_cos"][5] = -0.0
    glass["glass_material"][9] = 2
    glass["glass_segment"][11] = 4_000_000_000  # beyond int32: the wire's <u4 keeps it
    glass["glass_transmission"][13] = np.nextafter(np.float32(1.0), np.float32(0.0))
    glass["glass_range"][17] = np.nan
    hits = _answer_with(glass)
    assert glass_rows(hits.extras, n).tolist() == [3, 5, 9, 11, 13, 17]
    decoded = decode_hits(pack_unpack(encode_hits(hits, compact=True)))
    for name in glass:  # (the mirror ray's fields are sent only when some ray met glass: not here)
        assert decoded.extras[name].tobytes() == glass[name].tobytes(), name
    assert set(GLASS_FIELDS) - set(glass) == {
        f"glass_mirror_{k}" for k in ("range", "cos", "material", "segment")
    }
    none = _answer_with({k: v[:0] for k, v in glass.items()})  # no rays at all
    assert decode_hits(pack_unpack(encode_hits(none, compact=True))).extras["glass_cos"].size == 0


def pack_unpack(answer: dict[str, Any]) -> Any:
    """The answer as a client receives it (msgpack bytes decoded)."""
    from rt_lidar.unreal_bridge import fast_decode

    msg, _end = fast_decode.decode(pack(answer), 0, {})
    return msg


def _compact_raw() -> dict[str, Any]:
    with served() as (_sim, server), AirSimClient(port=server.port) as client:
        client.sim_continue_for_time(0.05)
        raw: dict[str, Any] = client.rpc.call("rtLidarGetHits", "", "", {"compact": True})
    assert raw["compact"] is True and raw["fields"][GLASS_ROWS]["shape"][0] > 0
    return raw


def _with_field(raw: dict[str, Any], name: str, **changes: Any) -> dict[str, Any]:
    return {**raw, "fields": {**raw["fields"], name: {**raw["fields"][name], **changes}}}


def test_a_malformed_compact_answer_is_refused_naming_what_is_wrong() -> None:
    raw = _compact_raw()
    rows = np.frombuffer(raw["fields"][GLASS_ROWS]["data"], "<u4")
    k = rows.size
    bad = {
        "a signed row list": _with_field(raw, GLASS_ROWS, dtype="<i4"),
        "a row list of two dimensions": _with_field(raw, GLASS_ROWS, shape=[k, 1]),
        "more rows than rays": _with_field(raw, GLASS_ROWS, shape=[raw["count"] + 1]),
        "rows out of order": _with_field(raw, GLASS_ROWS, data=rows[::-1].tobytes()),
        "a row past the last ray": _with_field(
            raw, GLASS_ROWS, data=np.append(rows[:-1], raw["count"]).astype("<u4").tobytes()
        ),
        "a glass field of every ray": _with_field(
            raw, "glass_cos", shape=[raw["count"]], data=bytes(4 * raw["count"])
        ),
    }
    for what, answer in bad.items():
        with pytest.raises(WireFormatError, match="rtLidarGetHits") as err:
            decode_hits(answer)
        assert GLASS_ROWS in str(err.value) or "glass_cos" in str(err.value), what


@pytest.mark.parametrize("method", ["rtLidarGetHits", BEAM_HITS_METHOD])
def test_a_compact_option_that_is_not_a_boolean_is_refused(method: str) -> None:
    options = {"compact": "yes"}
    with served() as (_sim, server), AirSimClient(port=server.port) as client:
        with pytest.raises(RpcError, match="'compact' must be true or false"):
            client.rpc.call(method, "", "", options)
        client.sim_continue_for_time(0.05)
        beam: Any = client.rpc.call(BEAM_HITS_METHOD, "", "", {"compact": True, "omit": ["point"]})
        assert beam["compact"] is True and GLASS_ROWS in beam["fields"] and beam["omitted"] == ["point"]
        plain: Any = client.rpc.call("rtLidarGetHits", "", "")
        assert "compact" not in plain and GLASS_ROWS not in plain["fields"]
        assert plain["fields"]["material"]["dtype"] == "<i4"


_WithoutCompact = server_of_before({"in_order": True, "omit": sorted(LEAN_FIELDS)})
"""A server of before compact answers (its ``rtLidarServerInfo`` does not offer them)."""


def test_the_bridge_asks_for_compact_answers_only_of_a_server_that_offers_them() -> None:
    """Against our server the bridge asks for compact answers, against one of before it does not, and
    its scans are the same bytes either way."""
    preset = load_preset("HDL-64E")
    scans: dict[bool, list[bytes]] = {}
    for server_type, asked in ((AirSimServer, True), (_WithoutCompact, False)):
        with served(preset.name, server_type) as (_sim, server), AirSimClient(port=server.port) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            assert client.compact is asked and source.stats.compact is asked
            assert source.stats.as_dict("ours")["compact"] is asked
            pipe = bridge_pipeline(source, sim_hz=20.0, seed=3)
            scans[asked] = [scan.points.tobytes() for scan in pipe.scans(2)]
            pipe.close()
    assert len(scans[True][0]) > 100_000 and scans[True] == scans[False]
