"""A validated :class:`SensorPreset` from a :class:`VendorTable` and its model's datasheet figures.

The beam table (and the lidar mode, where the file has one) come from the file; range, rotation rates,
firing cycle and wavelength from the model's datasheet (:mod:`.models`); optics, pulse, receiver, output
and returns from the shipped preset the model names as its stand-in; the detection threshold is computed
from the datasheet's 10 % range. ``provenance`` records which is which.
"""

from __future__ import annotations

import itertools
import re
import warnings
from pathlib import Path
from typing import Any

from rt_lidar.errors import PresetError
from rt_lidar.sensor.presets import (
    SensorPreset,
    lambertian_return_w,
    load_preset,
    preset_from_dict,
    preset_to_dict,
)
from rt_lidar.sensor.vendor.models import ModelSpec, find_model, models_for
from rt_lidar.sensor.vendor.origins import robosense_origin, velodyne_origin
from rt_lidar.sensor.vendor.table import VendorTable, refuse

__all__ = ["choose_model", "preset_from_table"]


def _span(t: VendorTable) -> tuple[float, float]:
    el = [b["elevation_deg"] for b in t.beams]
    return min(el), max(el)


def _guess(t: VendorTable, candidates: list[ModelSpec]) -> ModelSpec:
    """The candidate whose beam fan fits the table (the vendors' fans differ where beam counts agree)."""
    lo, hi = _span(t)
    names = {m.name: m for m in candidates}

    def pick(name: str) -> ModelSpec:
        return names.get(name, candidates[0])

    v, n = t.vendor, len(t.beams)
    if v == "Velodyne" and n == 16:
        return pick("Puck Hi-Res" if hi - lo <= 25.0 else "VLP-16")
    if v == "Velodyne" and n == 32:
        return pick("HDL-32E" if lo < -27.0 else "VLP-32C")
    if v == "Hesai" and n == 16:
        return pick("JT16" if hi > 30.0 else "PandarXT-16")
    if v == "Hesai" and n == 32:
        return pick("PandarXT-32M2X" if hi - lo > 36.0 else "PandarXT-32")
    if v == "Hesai" and n == 64:
        return pick("PandarQT64" if hi - lo > 90.0 else "Pandar64")
    if v == "Hesai" and n == 128:
        if hi > 80.0:
            return pick("JT128")
        if hi - lo > 90.0:
            return pick("PandarQT128")
        return pick("AT128" if hi - lo < 26.0 else "Pandar128E3X")
    if v == "RoboSense" and n == 32:
        return pick("RS-Bpearl" if hi > 45.0 else "RS-Helios" if lo < -40.0 else "RS-32")
    if v == "Ouster":
        if hi > 60.0 and lo > -30.0:  # a fan up to the zenith: the hemispherical OSDome
            return pick("OSDome")
        return pick("OS0" if hi - lo > 60.0 else "OS2" if hi - lo < 30.0 else "OS1")
    return candidates[0]


def _name_parts(stem: str) -> list[tuple[str, str]]:
    """A file name's words and pairs of words (``lidar_VLP-32C_2019`` -> ``VLP-32C``, ``Puck LITE``)."""
    words = [w for w in re.split(r"[_\s.]+", stem) if w]
    pairs = [f"{a} {b}" for a, b in itertools.pairwise(words)]
    words += [w.split("-", k)[k] for w in list(words) for k in range(1, w.count("-") + 1)]  # VeloView-VLP-32C
    return [(w, "file name") for w in (*pairs, *words) if len(w) >= 3]


def choose_model(t: VendorTable, model: str | None) -> tuple[ModelSpec, str]:
    """The table's model and how it was chosen: ``--model``, what the file says, or the beam fan."""
    n = len(t.beams)
    spec: ModelSpec | None = None
    if model is not None:
        spec = find_model(model, t.path, t.vendor)
        said = f"--model {model}"
        if t.model and t.model_said_by not in ("file name", "folder name"):
            try:
                own = find_model(t.model, t.path, t.vendor)
            except PresetError:
                own = None
            if own is not None and own.name.split()[0] != spec.name.split()[0]:
                t.warnings.append(
                    f"{t.path}: the file says {own.name} ({t.model_said_by}) but --model says {spec.name}: "
                    f"took {spec.name}"
                )
    else:
        said = ""
        hints = [(t.model, t.model_said_by)] if t.model else []
        if t.model_said_by in ("file name", "folder name"):  # the other name too, the vendor's prefix off
            p = Path(t.path)
            hints = [(p.stem, "file name"), (p.parent.name, "folder name")]
            hints += [(h[len(t.vendor) :], by) for h, by in hints if h.lower().startswith(t.vendor.lower())]
            hints += _name_parts(p.stem)  # "nebula_Pandar64", "front Puck LITE db": the product among words
        for hint, by in hints:
            try:
                found = find_model(hint, t.path, t.vendor)
            except PresetError:
                if by.startswith("prod_line"):
                    raise
                continue
            if (
                n in found.beams
                or any(k in found.beams for k in t.alternatives)
                or by.startswith("prod_line")
            ):
                spec, said = found, f"{by} {hint!r}"
                break
        if spec is None:
            candidates = models_for(t.vendor, n)
            if not candidates:
                raise refuse(
                    t.path, "beams", f"{n} beams: no {t.vendor} model we know has that many; give --model"
                )
            spec = _guess(t, candidates)
            if len(candidates) > 1:
                others = ", ".join(c.name for c in candidates if c is not spec)
                said = f"guessed from {n} beams and the beam fan (could also be {others})"
                t.warnings.append(
                    f"{t.path}: the file does not name its model: took {spec.name} ({n} beams, fan "
                    f"{_span(t)[0]:.1f}..{_span(t)[1]:.1f} deg); give --model if it is {others}"
                )
            else:
                said = f"the only {t.vendor} model with {n} beams"
    assert spec is not None
    alt = next((k for k in t.alternatives if k in spec.beams), None)
    if n not in spec.beams and alt is not None:
        beams, why = t.alternatives[alt]
        t.warnings.append(f"{t.path}: {why}: took those {alt}, as a {spec.name} has ({said})")
        t.beams, n = beams, alt
    elif t.alternatives:
        k = next(iter(t.alternatives))
        t.warnings.append(
            f"{t.path}: {t.alternatives[k][1]}: took the {n} enabled ones; give --model to say which"
        )
    if n not in spec.beams:
        raise refuse(
            t.path,
            "beams",
            f"{n} beams, but a {spec.name} has {' or '.join(map(str, spec.beams))} ({said})",
        )
    return spec, said


def _name(path: str) -> str:
    stem = Path(path).name
    for suffix in (".json", ".yaml", ".yml", ".xml", ".csv", ".dat"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    if stem.lower() in ("angle", "angles", "db", "calibration", "metadata"):
        stem = f"{Path(path).parent.name}_{stem}"  # RoboSense's angle.csv: its folder says which unit
    return re.sub(r"\s+", "_", stem) or "vendor"


def _origins(t: VendorTable, spec: ModelSpec, prov: dict[str, str]) -> Any:
    """Per beam -> its origin fields beyond what the reader set (Velodyne's offsets, RoboSense's lens
    centre), recording where they came from in ``prov``."""
    if t.vendor == "Velodyne" and any(velodyne_origin(b) for b in t.beams):
        prov["beams.origin_m"] = "file: vert/horiz_offset_correction, placed as velodyne_decoder places them"
        return velodyne_origin
    if t.vendor == "RoboSense":
        lens = robosense_origin(spec.name)
        if lens:
            prov["beams.origin_m"] = f"rs_driver's lens centre of the {spec.name} (RX, RZ; not in the file)"
            t.unused = [u for u in t.unused if not u.startswith("lens centre")]
        else:
            t.unused = [
                u.replace("rays start at the axis", f"not known for the {spec.name}: rays start at the axis")
                for u in t.unused
            ]
        return lambda _b: lens
    return lambda _b: {}


HIGH_RES_CYCLE_US = 40.0
"""An OT128 whose columns are closer than this fires in its high-resolution mode (operational state 0,
27.78 us a column at 10 Hz), else in the standard mode (operational state 2, 55.56 us)."""


def _pick_states(
    t: VendorTable,
    scan: dict[str, Any],
    states: dict[int, list[list[float]]],
    said: str,
    prov: dict[str, str],
) -> tuple[list[list[float]], list[float]]:
    """The azimuth-state rows of the operational state the preset's column rate is (and, per ring, the
    offset of its first state that fires it, as ``firing_offset_us``)."""
    if scan.get("pattern") != "rotating":
        raise refuse(t.path, "firetime", "an azimuth-state firetime table goes with a rotating sensor")
    cycle = scan.get("firing_cycle_us") or 1e6 / scan["rotation_hz"] / scan["columns_per_rev"]
    op = 0 if cycle < HIGH_RES_CYCLE_US else 2
    name = {0: "high resolution", 2: "standard"}[op]
    if op not in states:
        raise refuse(
            t.path,
            "firetime",
            f"the firetime table has operational states {sorted(states)}, not {op} ({name}: "
            f"{cycle:g} us a column)",
        )
    rows = states[op]
    prov["beams.firing_state_offsets_us"] = (
        f"file: {said}, operational state {op} ({name}: {cycle:g} us a column), azimuth states "
        f"0..{len(rows) - 1} (column k in state k mod {len(rows)}; -1: does not fire)"
    )
    prov["beams.firing_offset_us"] = f"file: {said}, the first azimuth state that fires the beam"
    others = [o for o in states if o != op]
    if others:
        t.unused.append(f"firetime operational state(s) {others} (the preset's column rate is state {op})")
    n = len(rows[0])
    return rows, [next(row[r] for row in rows if row[r] >= 0) for r in range(n)]


def preset_from_table(
    t: VendorTable,
    model: str | None = None,
    firing_us: list[float] | None = None,
    firing_said: str = "",
    firing_states: dict[int, list[list[float]]] | None = None,
) -> SensorPreset:
    """The preset of table ``t``: ``model`` (a product name) where the file does not say it, ``firing_us``
    (per ring, from a firetime file) where the model's firing table should not be used, or
    ``firing_states`` (per operational state, per azimuth state, per ring; -1: does not fire) from the
    OT128's firetime table."""
    spec, said = choose_model(t, model)
    template = preset_to_dict(load_preset(spec.template))
    prov: dict[str, str] = {"model": said}
    prov.update({k: f"file: {v}" for k, v in t.from_file.items()})
    d: dict[str, Any] = {k: v for k, v in template.items() if k != "provenance"}
    d["name"] = _name(t.path)
    d["vendor"] = spec.vendor
    d["model"] = spec.name
    d["packet_format"] = spec.packet_format
    ds = f"datasheet {spec.name}"
    stand_in = f"preset {load_preset(spec.template).name} (stand-in, approximate)"

    scan = dict(template["scan"])
    if scan["pattern"] == "rotating":
        rot = t.rotation_hz if t.rotation_hz is not None else spec.rotation_hz
        lo, hi = spec.rotation_hz_range
        scan = {
            "pattern": "rotating",
            "rotation_hz": rot,
            "rotation_hz_range": [min(lo, rot), max(hi, rot)],
            "rotation_direction": template["scan"].get("rotation_direction", "cw"),
            "scan_start_azimuth_deg": template["scan"].get("scan_start_azimuth_deg", 180.0),
        }
        prov.setdefault("scan.rotation_hz", ds)
        prov["scan.rotation_hz_range"] = ds
        if t.columns_per_rev is not None:
            scan["columns_per_rev"] = t.columns_per_rev
        elif spec.firing_cycle_us is not None:
            scan["firing_cycle_us"] = spec.firing_cycle_us
            prov["scan.firing_cycle_us"] = ds
        else:
            scan["columns_per_rev"] = spec.columns_per_rev
            prov["scan.columns_per_rev"] = ds
    else:
        el = [b["elevation_deg"] for b in t.beams]
        scan["fov_v_deg"] = max(float(scan.get("fov_v_deg", 0.0)), round(max(el) - min(el) + 0.1, 3))
        prov["scan"] = f"{stand_in}, fov_v_deg widened to the beams' fan"
        if t.scan_extra:
            scan.update(t.scan_extra)
            for k in t.scan_extra:
                prov.setdefault(f"scan.{k}", "file")
    d["scan"] = scan
    d["range"] = {
        "min_m": spec.min_m,
        "max_m": spec.max_m,
        "accuracy_m": spec.accuracy_m,
        "range_10pct_m": min(spec.range_10pct_m, spec.max_m),
    }
    prov["range"] = ds
    optics = dict(template["optics"])
    optics["wavelength_nm"] = spec.wavelength_nm
    d["optics"] = optics
    prov["optics.wavelength_nm"] = ds
    for part in ("optics", "pulse", "receiver", "output", "returns"):
        prov.setdefault(part, stand_in)
    pulse = dict(template["pulse"])
    threshold = lambertian_return_w(
        pulse["peak_power_w"],
        optics["receiver_aperture_m"],
        optics["system_efficiency"],
        d["range"]["range_10pct_m"],
    )
    pulse["detection_threshold_w"] = float(f"{threshold:.4g}")
    d["pulse"] = pulse
    prov["pulse.detection_threshold_w"] = "computed: a 10 % target at range.range_10pct_m"

    beams = []
    state_rows: list[list[float]] | None = None
    if firing_states is not None:
        state_rows, offsets = _pick_states(t, scan, firing_states, firing_said, prov)
    elif firing_us is not None:
        base = min(firing_us)
        offsets = [round(f - base, 6) for f in firing_us]
        prov["beams.firing_offset_us"] = f"file: {firing_said} (shifted to start at 0)"
    elif spec.firing is not None:
        offsets = [round(spec.firing(int(b["laser_id"])), 6) for b in t.beams]
        prov["beams.firing_offset_us"] = f"{spec.name} firing schedule (by laser id)"
    else:
        offsets = [0.0] * len(t.beams)
        prov["beams.firing_offset_us"] = (
            "0: all beams of a column fire together (or the model's schedule is unknown)"
        )
    cycle = scan.get("firing_cycle_us")
    if cycle is not None and offsets and max(offsets) >= cycle:
        t.warnings.append(
            f"{t.path}: firing offsets reach {max(offsets):g} us, beyond the {cycle:g} us firing cycle "
            f"of a {spec.name}: firings of one column overlap the next"
        )
    origin_of = _origins(t, spec, prov)
    for b, off in zip(t.beams, offsets, strict=True):
        beam = dict(b)
        beam["elevation_deg"] = round(float(b["elevation_deg"]), 9)
        beam["azimuth_offset_deg"] = round(float(b["azimuth_offset_deg"]), 9)
        beam["firing_offset_us"] = off
        if state_rows is not None:
            beam["firing_state_offsets_us"] = [row[int(b["ring"])] for row in state_rows]
        beam.update(origin_of(beam))
        beams.append(beam)
    d["beams"] = beams
    if t.unused:
        prov["not_used"] = "; ".join(t.unused)
    d["provenance"] = prov
    d["source"] = (
        f"{t.path} ({t.layout}); model {spec.name} ({said}); {spec.note}; other figures from {stand_in}"
    )
    preset = preset_from_dict(d, t.path)
    for w in t.warnings:
        warnings.warn(w, stacklevel=3)
    return preset
