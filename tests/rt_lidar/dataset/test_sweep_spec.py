"""Sweep files: what they expand to, and that bad ones are refused with the file, field and allowed values."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from dataset_support import SMALL_SWEEP, tiny_sweep_dict

from rt_lidar.dataset import SweepError, expand_runs, load_sweep, parse_sweep
from rt_lidar.dataset.runs import run_digest


def test_small_sweep_expands_to_stable_runs() -> None:
    spec = load_sweep(SMALL_SWEEP)
    runs = expand_runs(spec)
    assert [r.run_id for r in runs] == [
        "street.1_cruise_vlp-16_clear_s0",
        "street.1_cruise_vlp-16_rain20_s0",
        "street.2_cruise_vlp-16_clear_s0",
        "street.2_cruise_vlp-16_rain20_s0",
    ]
    assert [r.sequence_name for r in runs] == ["00", "01", "02", "03"]
    assert spec.camera.enabled and spec.frames == 3
    again = expand_runs(load_sweep(SMALL_SWEEP))
    assert [run_digest(r) for r in runs] == [run_digest(r) for r in again]
    assert len({run_digest(r) for r in runs}) == 4


def test_grid_is_the_product_of_all_axes() -> None:
    d = tiny_sweep_dict(seeds=[0, 1, 2])
    d["weather"] = {"rain_mm_h": [0, 10], "fog_visibility_m": ["none", 150], "snow_mm_h": 1}
    d["trajectories"] = [{"kind": "scene"}, {"name": "parked", "kind": "static", "start": [5, -1.75, 0]}]
    runs = expand_runs(parse_sweep(d, "grid.toml"))
    assert len(runs) == 1 * 2 * 1 * 4 * 3
    assert "street_parked_vlp-16_rain10-fog150-snow1_s2" in {r.run_id for r in runs}


def _mutate(path: str, value: Any) -> dict[str, Any]:
    d = copy.deepcopy(tiny_sweep_dict())
    *head, last = path.split(".")
    node: Any = d
    for key in head:
        node = node[int(key)] if key.isdigit() else node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return d


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "field", "words"),
    [
        ("sweep.frames", 0, "sweep.frames", "must be in [1, 100000], got 0"),
        ("sweep.framez", 3, "sweep.framez", "unknown key; allowed keys: name, frames"),
        ("sweep.seeds", [1, "x"], "sweep.seeds[1]", "must be an integer"),
        ("scenes.0.kind", "forest", "scenes[0].kind", "must be one of street, mesh"),
        ("scenes.0.name", "my street", "scenes[0].name", "letters, digits"),
        ("scenes", [], "scenes", "at least one [[scenes]]"),
        ("sensors.0.preset", "NoSuchLidar", "sensors[0].preset", "packaged presets: "),
        ("sensors.0.mount", {"xyz": [0, 0]}, "sensors[0].mount.xyz", "list of 3 numbers"),
        ("weather.rain_mm_h", [0, 500], "weather.rain_mm_h[1]", "must be in [0, 200] mm/h, got 500"),
        ("weather.fog_visibility_m", ["fog"], "weather.fog_visibility_m[0]", "must be a number or 'none'"),
        ("weather.snow_mm_h", [], "weather.snow_mm_h", "must list at least one value"),
        ("weather.hail", [1], "weather.hail", "unknown key"),
        ("sensors", _DELETE, "sensors", "at least one [[sensors]]"),
        ("sensors.0.name", "a b", "sensors[0].name", "letters, digits"),
        ("sweep.sinks", ["pcd", "udp"], "sweep.sinks[1]", "'udp' is not a recording sink"),
        ("scenes.0.seeds", [1, -1], "scenes[0].seeds[1]", "must be in [0, 2147483647], got -1"),
        ("scenes.0.path", "x.glb", "scenes[0].path", "unknown key; allowed keys: name, kind, seed"),
        ("trajectories", [{"kind": "waypoints", "times": [0]}], "trajectories[0].times", "at least 2 values"),
        ("trajectories", [{"kind": "flying"}], "trajectories[0].kind", "must be one of scene, static"),
        (
            "trajectories",
            [{"kind": "waypoints", "times": [0, 1], "positions": [[0, 0, 0]]}],
            "trajectories[0].positions",
            "must have one item for each of times (2), got 1",
        ),
        (
            "trajectories",
            [{"kind": "waypoints", "times": [1, 1], "positions": [[0, 0, 0]] * 2}],
            "trajectories[0].times",
            "must increase strictly",
        ),
        ("trajectories", [{"kind": "static", "speed_mps": 3}], "trajectories[0].speed_mps", "unknown key"),
        ("camera", {"mount": {"xyz": [0, 0, 500]}}, "camera.mount.xyz[2]", "must be in [-100, 100] m"),
        ("labels", [{"object": "x"}], "labels[0].class", "is required"),
    ],
)
def test_bad_sweeps_name_the_field(path: str, value: Any, field: str, words: str) -> None:
    with pytest.raises(SweepError) as err:
        parse_sweep(_mutate(path, value), "bad.toml")
    assert err.value.source == "bad.toml"
    assert err.value.field == field
    assert words in str(err.value)
    assert str(err.value).startswith(f"bad.toml: field '{field}': ")


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="no such sweep file"):
        load_sweep(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep\nframes = 2\n")
    with pytest.raises(SweepError, match=r"bad\.toml: field '-': not valid TOML"):
        load_sweep(bad)
    mesh = tmp_path / "mesh.toml"
    mesh.write_text(
        '[[scenes]]\nname = "yard"\nkind = "mesh"\npath = "yard.glb"\n[[sensors]]\npreset = "VLP-16"\n'
    )
    with pytest.raises(SweepError, match=r"scenes\[0\]\.path': no such mesh file: .*yard\.glb"):
        load_sweep(mesh)
    (tmp_path / "yard.glb").write_bytes(b"")
    mesh.write_text(mesh.read_text().replace('kind = "mesh"', 'kind = "mesh"\nclass = "castle"'))
    with pytest.raises(SweepError, match=r"scenes\[0\]\.class': must be one of unlabeled, outlier, car"):
        load_sweep(mesh)


def test_a_constant_velocity_trajectory_has_a_valid_default_name() -> None:
    d = tiny_sweep_dict()
    d["trajectories"] = [{"kind": "constant_velocity", "speed_mps": 4}]
    (traj,) = parse_sweep(d, "cv.toml").trajectories
    assert (traj.name, traj.speed_mps) == ("constant-velocity", 4.0)


def test_duplicate_names_are_refused() -> None:
    d = tiny_sweep_dict()
    d["sensors"] = [{"preset": "VLP-16"}, {"preset": "VLP-16"}]
    with pytest.raises(SweepError, match="sensors': names must be unique; repeated: vlp-16"):
        parse_sweep(d, "dup.toml")


def test_a_sweep_too_large_is_refused_before_any_run_is_built() -> None:
    d = tiny_sweep_dict(seeds=list(range(400)))
    d["weather"] = {
        "rain_mm_h": list(range(0, 200, 1))[:100],
        "fog_visibility_m": ["none", 150, 300],
        "snow_mm_h": 0,
    }
    spec = parse_sweep(d, "huge.toml")
    with pytest.raises(SweepError, match=r"huge\.toml.*120000 runs; at most 100000"):
        expand_runs(spec)
