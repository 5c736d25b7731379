"""``rt-lidar osi fmu``: the OSI sensor model as an FMI 2.0 co-simulation FMU following OSMP (ASAM OSI
Sensor Model Packaging).

The FMU holds ``modelDescription.xml`` (``OSMPSensorViewIn`` / ``OSMPSensorDataOut`` /
``OSMPSensorViewInConfigRequest`` / ``OSMPSensorViewInConfig`` as ``.base.lo``, ``.base.hi``, ``.size``
Integer triples with OSMP's ``net.pmsf.osmp`` annotations, and an Integer parameter ``seed``),
``binaries/linux64/<id>.so`` (``osmp_fmu.c``, compiled here with the system C compiler) and
``resources/`` (the settings, the preset when it is a file, and the Python paths that reach rt-lidar).
The library runs rt-lidar's Python model (:mod:`rt_lidar.osi.fmu_runtime`) through the CPython C API, in
the host's interpreter when there is one (fmpy), else in one it starts from the libpython this build
ran on: the FMU works on this machine and on machines with the same Python and rt-lidar paths.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import uuid
import zipfile
from pathlib import Path
from xml.sax.saxutils import quoteattr

from rt_lidar.errors import ConfigError
from rt_lidar.osi.fmu_runtime import CONFIG_FILE
from rt_lidar.osi.frames import osi_version
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import SensorPreset, load_preset

__all__ = ["OSMP_VERSION", "build_fmu", "model_description"]

OSMP_VERSION = "1.5.0"
"""The OSMP version the model description declares."""
_C_SOURCE = Path(__file__).with_name("osmp_fmu.c")
_BINARIES = {"linux": "linux64"}
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)

_SVC = "SensorViewConfiguration"
# (name, role, causality, variability, initial, start, OSI type)
_BINARY_VARIABLES = (
    ("OSMPSensorViewIn", "input", "discrete", None, "0", "SensorView"),
    ("OSMPSensorDataOut", "output", "discrete", "exact", "0", "SensorData"),
    (
        "OSMPSensorViewInConfigRequest",
        "calculatedParameter",
        "fixed",
        "calculated",
        None,
        "SensorViewConfiguration",
    ),
    ("OSMPSensorViewInConfig", "parameter", "fixed", None, "0", "SensorViewConfiguration"),
)
_OSMP_TOOL = '<Tool name="net.pmsf.osmp" xmlns:osmp="http://xsd.pmsf.net/OSISensorModelPackaging">'


def model_description(model_id: str, guid: str, description: str, step_s: float, seed: int) -> str:
    """The FMI 2.0 ``modelDescription.xml`` of the OSMP sensor FMU."""
    osi = osi_version()
    rows = []
    vr = 0
    index = 0
    outputs: list[int] = []
    requests: list[int] = []
    config_index: list[int] = []
    for name, causality, variability, initial, start, osi_type in _BINARY_VARIABLES:
        for role in ("base.lo", "base.hi", "size"):
            index += 1
            attrs = f'name="{name}.{role}" valueReference="{vr}" causality="{causality}"'
            attrs += f' variability="{variability}"'
            if initial:
                attrs += f' initial="{initial}"'
            value = f'<Integer start="{start}"/>' if start is not None else "<Integer/>"
            mime = f"application/x-open-simulation-interface; type={osi_type}; version={osi}"
            rows.append(
                f"    <ScalarVariable {attrs}>\n      {value}\n      <Annotations>\n        {_OSMP_TOOL}"
                f'<osmp:osmp-binary-variable name="{name}" role="{role}" mime-type="{mime}"/></Tool>\n'
                "      </Annotations>\n    </ScalarVariable>"
            )
            if causality == "output":
                outputs.append(index)
            if causality == "calculatedParameter":
                requests.append(index)
            if name == "OSMPSensorViewInConfig":
                config_index.append(index)
            vr += 1
    index += 1
    rows.append(
        f'    <ScalarVariable name="seed" valueReference="{vr}" causality="parameter" variability="fixed" '
        f'description="seed of every random draw (0: the seed the FMU was built with)">\n'
        f'      <Integer start="0"/>\n    </ScalarVariable>'
    )
    seed_index = index
    deps = " ".join(str(i) for i in (*config_index, seed_index))
    initial_unknowns = "\n".join(f'      <Unknown index="{i}" dependencies="{deps}"/>' for i in requests)
    out_rows = "\n".join(f'      <Unknown index="{i}"/>' for i in outputs)
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription
  fmiVersion="2.0"
  modelName={quoteattr(model_id)}
  guid="{guid}"
  description={quoteattr(description)}
  author="rt-lidar"
  version="{OSMP_VERSION}"
  generationTool="rt-lidar osi fmu"
  variableNamingConvention="structured">
  <CoSimulation
    modelIdentifier="{model_id}"
    canHandleVariableCommunicationStepSize="true"
    canNotUseMemoryManagementFunctions="true"/>
  <LogCategories>
    <Category name="logError" description="errors of the model (a Python exception, a bad buffer)"/>
  </LogCategories>
  <DefaultExperiment startTime="0.0" stepSize="{step_s!r}"/>
  <VendorAnnotations>
    {_OSMP_TOOL}<osmp:osmp version="{OSMP_VERSION}" osi-version="{osi}"/></Tool>
  </VendorAnnotations>
  <ModelVariables>
{chr(10).join(rows)}
  </ModelVariables>
  <ModelStructure>
    <Outputs>
{out_rows}
    </Outputs>
    <InitialUnknowns>
{initial_unknowns}
    </InitialUnknowns>
  </ModelStructure>
</fmiModelDescription>
"""


def _compiler() -> str:
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    raise ConfigError("rt-lidar osi fmu: no C compiler (cc, gcc or clang) on PATH to build the FMU's library")


def _libpython() -> str:
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    name = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY") or ""
    path = Path(libdir) / name
    return str(path) if path.is_file() else name


def _python_path() -> list[str]:
    """The folders this process imports from (rt-lidar's first), for an interpreter the FMU starts."""
    import rt_lidar

    here = str(Path(rt_lidar.__file__).resolve().parents[1])
    out = [here]
    for entry in sys.path:
        if entry and Path(entry).is_dir() and str(Path(entry).resolve()) not in out:
            out.append(str(Path(entry).resolve()))
    return out


def build_fmu(
    preset: str | SensorPreset,
    out: str | Path,
    *,
    beam: BeamConfig | None = None,
    weather: WeatherConfig | None = None,
    seed: int = 0,
    step_s: float = 0.05,
    mount: tuple[float, ...] = (0.0, 0.0, 1.8, 1.0, 0.0, 0.0, 0.0),
) -> Path:
    """Build the OSMP sensor FMU of ``preset`` at ``out`` (a ``.fmu`` file); returns its path."""
    from rt_lidar.osi.frames import require_osi

    require_osi()
    out = Path(out)
    if out.suffix.lower() != ".fmu":
        raise ConfigError(f"--out {out}: an FMU file must end in .fmu")
    if not 0.0 < step_s <= 10.0:
        raise ConfigError(f"--step {step_s}: must be in (0, 10] s")
    if len(mount) != 7:
        raise ConfigError(f"mount: expected x, y, z, qw, qx, qy, qz, got {mount}")
    if sys.platform not in _BINARIES:
        raise ConfigError(f"rt-lidar osi fmu builds Linux FMUs only (this is {sys.platform})")
    preset_ref: str
    extra: dict[str, bytes] = {}
    if isinstance(preset, SensorPreset):
        raise ConfigError("build_fmu: give the preset's name or its .toml file")
    loaded = load_preset(preset)  # checked now, not when the FMU is instantiated
    if str(preset).endswith(".toml"):
        preset_ref = "preset.toml"
        extra[preset_ref] = Path(preset).read_bytes()
    else:
        preset_ref = str(preset)
    settings = {
        "preset": preset_ref,
        "beam": None if beam is None else {"sub_rays": beam.sub_rays, "return_mode": beam.return_mode},
        "weather": None if weather is None else {k: v for k, v in vars(weather).items() if v is not None},
        "seed": int(seed),
        "step_s": float(step_s),
        "mount": [float(v) for v in mount],
    }
    settings_text = json.dumps(settings, indent=2, sort_keys=True)
    model_id = "rt_lidar_" + "".join(c if c.isalnum() else "_" for c in loaded.name.lower())
    digest = hashlib.sha256((settings_text + _C_SOURCE.read_text()).encode()).hexdigest()
    guid = "{" + str(uuid.UUID(digest[:32])) + "}"
    description = f"rt-lidar {loaded.name} lidar as an OSI sensor model (OSMP)"
    xml = model_description(model_id, guid, description, step_s, seed)
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / f"{model_id}.so"
        cmd = [
            _compiler(),
            "-shared",
            "-fPIC",
            "-O2",
            "-fvisibility=hidden",
            f'-DRT_LIDAR_LIBPYTHON="{_libpython()}"',
            "-o",
            str(lib),
            str(_C_SOURCE),
            "-ldl",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ConfigError(
                f"rt-lidar osi fmu: compiling {_C_SOURCE.name} failed: {done.stderr.strip()[:500]}"
            )
        files = {
            "modelDescription.xml": xml.encode(),
            f"binaries/{_BINARIES[sys.platform]}/{model_id}.so": lib.read_bytes(),
            f"resources/{CONFIG_FILE}": settings_text.encode(),
            "resources/python_path.txt": ("\n".join(_python_path()) + "\n").encode(),
            **{f"resources/{k}": v for k, v in extra.items()},
        }
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".part")
    with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, _ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, files[name])
    part.replace(out)
    return out
