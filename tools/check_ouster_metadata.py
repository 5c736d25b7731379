"""Run real Ouster metadata files through our ``ouster-pcap`` sink and ouster-sdk, and tabulate what happens.

    PYTHONPATH=. .venv/bin/python tools/check_ouster_metadata.py [--peer .venv-ouster/bin/python]
        [--markdown OUT.md] FILE.json ...

For each file (e.g. the metadata under ouster-sdk's ``tests/``; fetch the repository and pass them):

1. ouster-sdk parses the file alone (``core.SensorInfo``); a file it cannot parse is an **sdk failure**
   (the malformed files of its own tests are meant to fail).
2. Each Ouster preset whose beam count and beam altitudes fit the file (within
   :data:`rt_lidar.sinks.ouster_meta.ALTITUDE_TOLERANCE_DEG`) is tried; when none fits it is **no
   matching preset** (another model: OS-0/OS-2's narrower or wider fan, 16 or 32 beams).
3. The sink writes one street-scene scan with ``metadata=FILE``; a ``FieldError`` there (a
   ``lidar_mode`` of another column count, a profile we do not write, ...) is a **clear error**.
4. ouster-sdk decodes the pcap **with the file itself** (not the metadata we wrote beside it). When the
   frame's RANGE (and REFLECTIVITY) equal what we wrote, pixel for pixel, it is **identical**;
   otherwise **differs** (or **no frame**). A file that ouster-sdk 1.0 reads as lidar profile OFF (an
   empty ``udp_dest``) cannot decode any pcap; it is decoded with the metadata we wrote, and said so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rt_lidar.errors import ConfigError  # noqa: E402
from rt_lidar.sensor.presets import SensorPreset, load_preset  # noqa: E402
from rt_lidar.sinks.base import SinkContext  # noqa: E402
from rt_lidar.sinks.ouster import RNG15, OusterPacketizer, ouster_pcap_sink  # noqa: E402
from rt_lidar.sinks.ouster_meta import ALTITUDE_TOLERANCE_DEG, flat_view, read_metadata  # noqa: E402

OUSTER_PRESETS = ("OS1-64", "OS1-128")

PEER_SCRIPT = r"""
import json, sys, numpy as np
from ouster.sdk import core, open_source
jobs = json.loads(open(sys.argv[1]).read())
out = {}
for key, job in jobs.items():
    try:
        info = core.SensorInfo(open(job["given"]).read())
        res = {"profile": str(info.format.udp_profile_lidar), "mode": str(info.config.lidar_mode),
               "fw": str(info.fw_rev), "prod": str(info.prod_line)}
    except Exception as exc:
        out[key] = {"sdk_error": f"{type(exc).__name__}: {exc}"[:200]}
        continue
    if job.get("pcap"):
        meta = job["given"]
        if res["profile"] == "OFF":  # ouster-sdk 1.0 reads an empty udp_dest as lidar data off
            meta, res["with"] = job["ours"], "ours"
        try:
            frames = [fs[0] for fs in open_source(job["pcap"], meta=[meta], index=False)]
            res["frames"] = len(frames)
            if frames:
                np.save(job["out"] + "_range.npy", frames[0].field("RANGE").astype(np.int64))
                np.save(job["out"] + "_refl.npy", frames[0].field("REFLECTIVITY").astype(np.int64))
        except Exception as exc:
            res["decode_error"] = f"{type(exc).__name__}: {exc}"[:200]
    out[key] = res
print(json.dumps(out))
"""


@dataclass
class Row:
    """One file's outcome."""

    file: str
    sdk: str
    preset: str
    outcome: str
    detail: str


def fitting_presets(given: dict) -> tuple[list[SensorPreset], str]:
    """Ouster presets whose beams fit the file's beam altitudes, and why none do."""
    view = flat_view(given)
    alt = view.get("beam_altitude_angles", (None, None))[1]
    if not isinstance(alt, list) or not alt:
        return [], "no beam_altitude_angles"
    fits, why = [], []
    for name in OUSTER_PRESETS:
        p = load_preset(name)
        if len(alt) != p.n_rings:
            why.append(f"{name}: {p.n_rings} beams")
            continue
        off = float(np.abs(np.asarray(alt, float) - np.asarray(p.elevations_deg, float)).max())
        if off > ALTITUDE_TOLERANCE_DEG:
            why.append(f"{name}: altitudes {off:.1f} deg off")
            continue
        fits.append(p)
    return fits, f"{len(alt)} beams, {alt[0]:+.1f}..{alt[-1]:+.1f} deg ({'; '.join(why)})"


def _scan(preset: SensorPreset, cache: dict):
    if preset not in cache:
        from rt_lidar.pipeline.builder import build_pipeline

        cache[preset] = build_pipeline(preset, "street", seed=0).pipeline.scans(1)[0]
    return cache[preset]


def own_preset(path: Path) -> tuple[list[SensorPreset], str]:
    """The preset the file itself makes (``--preset FILE``, :mod:`rt_lidar.sensor.vendor`), or why not."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a model guessed from the fan: said by presets show
            return [load_preset(str(path))], ""
    except ConfigError as exc:
        return [], str(exc)


def check(files: list[Path], peer: Path, work: Path, own: bool = False) -> list[Row]:
    """The outcome of every metadata file (module docstring); ``own``: each file's own preset."""
    jobs: dict[str, dict] = {}
    ours: dict[str, tuple[str, np.ndarray, np.ndarray, np.ndarray] | tuple[str, str, str]] = {}
    scans: dict = {}
    for i, f in enumerate(files):
        key = str(i)
        jobs[key] = {"given": str(f)}
        try:
            given = read_metadata(f)
        except ConfigError as exc:
            ours[key] = ("clear error", "-", str(exc))
            continue
        fits, why = own_preset(f) if own else fitting_presets(given)
        if not fits:
            ours[key] = ("clear error" if own else "no matching preset", "-", why)
            continue
        preset = fits[0]
        pcap = work / f"{key}.pcap"
        try:
            sink = ouster_pcap_sink(str(pcap), {"metadata": str(f)})
            sink.open(SinkContext(preset))
            scan = _scan(preset, scans)
            sink.write(scan)
            sink.close()
        except ConfigError as exc:
            ours[key] = ("clear error", preset.name, str(exc))
            continue
        meta = json.loads(pcap.with_suffix(".json").read_text())
        pz = OusterPacketizer(preset, meta)
        img = pz.image(scan)
        rng = img["range"]
        if pz.format.profile in RNG15:
            rng = np.minimum((rng + 4) >> 3, (1 << 15) - 1) << 3
        inside = np.zeros(pz.cols, bool)
        inside[pz.format.window_columns()] = True
        ours[key] = (preset.name, np.where(inside, rng, 0), np.where(inside, img["reflectivity"], 0), inside)
        jobs[key].update(pcap=str(pcap), out=str(work / key), ours=str(pcap.with_suffix(".json")))
    (work / "jobs.json").write_text(json.dumps(jobs))
    (work / "peer.py").write_text(PEER_SCRIPT)
    run = subprocess.run(
        [str(peer), str(work / "peer.py"), str(work / "jobs.json")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if run.returncode != 0:
        raise SystemExit(f"ouster-sdk peer failed: {run.stderr[-2000:]}")
    sdk = json.loads(run.stdout.strip().splitlines()[-1])
    rows = []
    for i, f in enumerate(files):
        key, res = str(i), sdk[str(i)]
        name = f.name
        if "sdk_error" in res:
            rows.append(Row(name, "fails", "-", "sdk failure", res["sdk_error"]))
            continue
        desc = f"{res['prod'] or '?'} fw {res['fw'] or '?'}, {res['mode']}, {res['profile']}"
        mine = ours[key]
        if len(mine) == 3:
            outcome, fit, detail = (str(v) for v in mine)
            rows.append(Row(name, desc, fit, outcome, detail.replace(str(f.parent) + "/", "")))
            continue
        fit, want_rng, want_refl, _inside = mine
        if "decode_error" in res:
            rows.append(Row(name, desc, fit, "sdk failure", "decoding our pcap: " + res["decode_error"]))
            continue
        if not res.get("frames"):
            rows.append(Row(name, desc, fit, "no frame", "ouster-sdk read no frame from our pcap"))
            continue
        got_rng = np.load(work / f"{key}_range.npy")
        got_refl = np.load(work / f"{key}_refl.npy")
        same = np.array_equal(got_rng, want_rng) and np.array_equal(got_refl, want_refl)
        n = int((want_rng > 0).sum())
        if same and res.get("with") == "ours":
            why = "ouster-sdk reads this file as lidar profile OFF (udp_dest ''), so it was decoded with the "
            rows.append(
                Row(name, desc, fit, "identical", why + f"metadata we wrote; {n} pixels with a return")
            )
        elif same:
            rows.append(Row(name, desc, fit, "identical", f"{n} pixels with a return"))
        else:
            bad = int((got_rng != want_rng).sum())
            rows.append(Row(name, desc, fit, "differs", f"{bad} of {want_rng.size} range pixels differ"))
    return rows


def markdown(rows: list[Row]) -> str:
    """The table of outcomes, then a count per outcome."""
    lines = ["| file | ouster-sdk reads it as | preset | outcome | detail |", "|---|---|---|---|---|"]
    for r in rows:
        detail = r.detail.replace("|", "/").replace("\n", " ")
        lines.append(f"| `{r.file}` | {r.sdk} | {r.preset} | **{r.outcome}** | {detail} |")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    lines += ["", "Outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--peer", type=Path, default=ROOT / ".venv-ouster" / "bin" / "python")
    ap.add_argument("--markdown", type=Path, help="also write the table to this file")
    ap.add_argument(
        "--own-preset",
        action="store_true",
        help="each file's own preset (--preset FILE) instead of a shipped one",
    )
    args = ap.parse_args(argv)
    files = sorted(set(args.files))
    with tempfile.TemporaryDirectory() as tmp:
        rows = check(files, args.peer, Path(tmp), own=args.own_preset)
    table = markdown(rows)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
