"""The machine a benchmark ran on, recorded in every JSON that tools/bench writes.

A figure means little without the CPU it came from: a 2-core VM's speed differs by a factor of two
between an older Xeon and a Zen 4 EPYC, and the compiled steps pick their SIMD paths at run time.
:func:`describe` reads /proc/cpuinfo (the model name, AMD's and Intel's family/model, the SIMD
extensions the steps use, the hypervisor flag) and the platform; :func:`write_json` writes a report
with that record beside it, atomically, so a benchmark killed half way leaves no torn file.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f")

# AMD family 0x19 (25) models, by AMD's published ranges: Zen 3 (Milan, Vermeer, Cezanne) and Zen 4
# (Genoa, Raphael, Phoenix); family 0x17 is Zen / Zen+ / Zen 2, 0x1a Zen 5.
_ZEN_25 = ((0x00, 0x0F, "Zen 3"), (0x10, 0x1F, "Zen 4"), (0x20, 0x5F, "Zen 3"), (0x60, 0xAF, "Zen 4"))


def _cpuinfo(text: str) -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def microarchitecture(vendor: str, family: int, model: int) -> str | None:
    """AMD's core generation from family and model (``None`` where not known: Intel's model names
    already say which part it is)."""
    if vendor != "AuthenticAMD":
        return None
    if family == 0x17:
        return "Zen 2" if model >= 0x30 else "Zen / Zen+"
    if family == 0x1A:
        return "Zen 5"
    if family == 0x19:
        for lo, hi, name in _ZEN_25:
            if lo <= model <= hi:
                return name
    return None


def _read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def cpu_flags(cpuinfo_text: str | None = None) -> set[str]:
    """The first processor's feature flags (/proc/cpuinfo's ``flags``; empty where it cannot be read)."""
    text = _read_cpuinfo() if cpuinfo_text is None else cpuinfo_text
    return set(_cpuinfo(text).get("flags", "").split())


def describe(cpuinfo_text: str | None = None) -> dict[str, Any]:
    """CPU model, core generation, logical CPUs, SIMD extensions, virtualisation, kernel, memory,
    Python and NumPy: what a reader needs to compare a figure with their own machine's."""
    if cpuinfo_text is None:
        cpuinfo_text = _read_cpuinfo()
    f = _cpuinfo(cpuinfo_text)
    flags = cpu_flags(cpuinfo_text)
    vendor = f.get("vendor_id", "")
    family = int(f.get("cpu family", "0") or 0)
    model = int(f.get("model", "0") or 0)
    record: dict[str, Any] = {
        "cpu": f.get("model name") or platform.processor() or platform.machine(),
        "vendor": vendor,
        "family": family,
        "model": model,
        "microarchitecture": microarchitecture(vendor, family, model),
        "logical_cpus": os.cpu_count(),
        "simd": [s for s in SIMD_FLAGS if s in flags],
        "virtual_machine": "hypervisor" in flags,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    with contextlib.suppress(ValueError, OSError, AttributeError):  # sysconf names are Unix-only
        record["memory_gb"] = round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1)
    with contextlib.suppress(ImportError):
        import numpy

        record["numpy"] = numpy.__version__
    with contextlib.suppress(OSError):
        record["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return record


def summary(machine: dict[str, Any]) -> str:
    """One line for a report: 'AMD EPYC (Zen 3), 2 logical CPUs, AVX2, a VM, Linux 6.1, Python 3.11.7,
    NumPy 2.4.6; run 2026-12-04 15:50 UTC, load average 1.3 at its end'."""
    cpu = machine.get("cpu", "?")
    if machine.get("microarchitecture"):
        cpu += f" ({machine['microarchitecture']})"
    simd = machine.get("simd") or []
    widest = "AVX-512" if "avx512f" in simd else "AVX2" if "avx2" in simd else "no AVX2"
    parts = [cpu, f"{machine.get('logical_cpus', '?')} logical CPUs", widest]
    if machine.get("virtual_machine"):
        parts.append("a VM")
    parts.append(f"Linux {machine.get('kernel', '?')}")
    parts.append(f"Python {machine.get('python', '?')}")
    if machine.get("numpy"):
        parts.append(f"NumPy {machine['numpy']}")
    line = ", ".join(parts)
    if machine.get("utc"):
        line += f"; run {machine['utc']} UTC"
    if machine.get("load_average_at_end"):
        line += f", load average {machine['load_average_at_end'][0]:.1f} at its end"
    return line


def write_json(path: str | Path, report: dict[str, Any]) -> dict[str, Any]:
    """Write ``report`` with the machine's record under ``"machine"`` (replacing any there) to
    ``path``, through a temporary file renamed into place; returns what was written."""
    path = Path(path)
    out = {**report, "machine": describe()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(out, indent=2) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return out
