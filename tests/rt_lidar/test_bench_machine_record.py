"""Every benchmark's JSON names the machine it ran on, and the report ends each table with it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench"
sys.path.insert(0, str(BENCH))

import machine_record  # noqa: E402  (tools/bench)
import write_report  # noqa: E402

ZEN3_VM = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx hypervisor bmi1 avx2 smep

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: a second CPU that must not be read
flags\t\t: fpu
"""

XEON = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz
flags\t\t: sse4_2 avx avx2 fma avx512f avx512dq
"""


def test_a_zen3_vm_is_named_with_its_generation_simd_and_virtualisation():
    m = machine_record.describe(ZEN3_VM)
    assert m["cpu"] == "AMD EPYC" and (m["family"], m["model"]) == (25, 1)
    assert m["microarchitecture"] == "Zen 3"
    assert m["simd"] == ["sse4_2", "avx", "avx2", "fma"] and m["virtual_machine"] is True
    line = machine_record.summary(m)
    assert line.startswith("AMD EPYC (Zen 3), ") and ", AVX2, a VM, Linux " in line
    assert f"; run {m['utc']} UTC, load average " in line and len(m["utc"]) == len("2026-12-04 15:50")
    assert line.endswith(f"load average {m['load_average_at_end'][0]:.1f} at its end")


def test_an_intel_host_keeps_its_model_name_and_shows_avx512():
    m = machine_record.describe(XEON)
    assert m["microarchitecture"] is None and m["virtual_machine"] is False
    line = machine_record.summary(m)
    assert line.startswith("Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz, ") and "AVX-512" in line
    assert "a VM" not in line


@pytest.mark.parametrize(
    ("family", "model", "name"),
    [(0x17, 0x31, "Zen 2"), (0x17, 0x01, "Zen / Zen+"), (0x19, 0x11, "Zen 4"), (0x19, 0x21, "Zen 3"),
     (0x19, 0x61, "Zen 4"), (0x1A, 0x02, "Zen 5"), (0x19, 0xF0, None), (0x10, 0x02, None)],
)  # fmt: skip
def test_amd_generations_follow_the_family_and_model_ranges(family, model, name):
    assert machine_record.microarchitecture("AuthenticAMD", family, model) == name


def test_no_cpuinfo_still_gives_a_record():
    m = machine_record.describe("")
    assert m["cpu"] and m["simd"] == [] and m["microarchitecture"] is None
    assert machine_record.summary(m)


def test_write_json_adds_the_machine_and_leaves_nothing_half_written(tmp_path):
    out = tmp_path / "deep" / "r.json"
    written = machine_record.write_json(out, {"figure": 1.5, "machine": "an old string"})
    on_disk = json.loads(out.read_text())
    assert on_disk == written and on_disk["figure"] == 1.5
    assert on_disk["machine"]["logical_cpus"] >= 1 and "python" in on_disk["machine"]
    with pytest.raises(TypeError):  # not JSON: the file before stays, and no temporary is left
        machine_record.write_json(out, {"figure": object()})
    assert json.loads(out.read_text()) == written
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.json"]


def _report(bench: Path) -> str:
    out = bench / "performance.md"
    assert (
        write_report.main(["--bench", str(bench), "--out", str(out), "--extra", str(bench / "none.md")]) == 0
    )
    return out.read_text()


def test_the_report_ends_a_table_with_its_machine_or_says_it_has_none(tmp_path):
    docs_bench = BENCH.parents[1] / "docs" / "bench"
    decode = json.loads((docs_bench / "decode.json").read_text())
    written = machine_record.write_json(tmp_path / "decode.json", decode)
    udp = json.loads((docs_bench / "udp.json").read_text())
    udp.pop("machine", None)  # a JSON from before the benchmarks recorded their machine
    (tmp_path / "udp.json").write_text(json.dumps(udp))
    report = _report(tmp_path)
    decode_part = report[report.index("## Decoding AirSim's own answers") :].split("\n## ")[0]
    assert decode_part.rstrip().endswith(f"Machine: {machine_record.summary(written['machine'])}.")
    udp_part = report[report.index("## Hardware-in-the-loop UDP") :].split("\n## ")[0]
    assert udp_part.rstrip().endswith(
        "Machine: not recorded (a run from before the benchmarks recorded it; see the list above)."
    )
