"""The material table (``sensor_presets/materials.toml``): reflectance spectra and BRDF terms.

A :class:`MaterialTable` evaluated at a sensor's wavelength gives per-material arrays that the
physics kernels index with the per-hit material number, in the order of the world's material names.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.schema import Where, build, spec
from rt_lidar.sensor.hapke import road_lobes

__all__ = [
    "RETRO_LOBE_HALF_WIDTH_RAD",
    "MaterialArrays",
    "MaterialTable",
    "load_material_table",
    "lobe_albedo",
]

RETRO_LOBE_HALF_WIDTH_RAD = math.radians(0.5)
"""Half-width (observation angle) of a retro-reflector's return cone: sheeting is specified at 0.2 and
0.5 deg (ASTM E810); its energy is spread over about pi * this^2 sr around the source."""


def lobe_albedo(specular_gain: float, specular_exponent: float, retro_gain: float = 0.0) -> float:
    """Share of the incident power the lobes send back into the hemisphere (normal incidence).

    The monostatic ``S = g cos^n(theta)`` of a specular lobe is a Phong lobe about the mirror direction
    seen at twice the incidence angle, ``cos^n(theta) ~ cos^(n/4)(alpha)``, of peak BRDF ``g / pi``: its
    albedo is ``g / pi * 2 pi / (n / 4 + 1) = 8 g / (n + 4)``. A retro lobe's ``S = g`` is spread over
    the return cone: ``g / pi * pi w^2 = g w^2`` (``w`` = :data:`RETRO_LOBE_HALF_WIDTH_RAD`).
    """
    return 8.0 * specular_gain / (specular_exponent + 4.0) + retro_gain * RETRO_LOBE_HALF_WIDTH_RAD**2


@dataclass(frozen=True)
class MaterialSpec:
    """One ``[materials.NAME]`` table, checked by :func:`rt_lidar.schema.build`."""

    spectrum: tuple[float, ...] = spec(lo=0.0, hi=1.0)
    """Diffuse reflectance at each of the file's ``spectrum_nm`` wavelengths."""
    description: str = ""
    spectrum_source: str = ""
    """The ASTER spectrum ``tools/import_spectra.py`` sampled (empty: set by hand)."""
    spectrum_scale: float = spec(1.0, 0.0, 10.0)
    """Scale ``tools/import_spectra.py`` applied to the library spectrum."""
    retro_gain: float = spec(0.0, 0.0, 1e5)
    retro_exponent: float = spec(1.0, 0.0, 1e5)
    specular_gain: float = spec(0.0, 0.0, 1e6)
    specular_exponent: float = spec(1.0, 0.0, 1e5)
    transmission: float = spec(0.0, 0.0, 1.0)
    """One-way fraction of the light through the surface (glass)."""
    backscatter_fraction: float = spec(0.0, 0.0, 1.0)
    """Share ``w`` of the diffuse reflectance that a rough surface sends back towards the source (shadow
    hiding of its macro-texture): ``S = rho (1 - w) cos + rho w cos^backscatter_exponent`` instead of
    ``rho cos``, so the road keeps its return at grazing incidence (docs/realism.md)."""
    backscatter_exponent: float = spec(1.0, 0.0, 1.0)
    """Exponent ``n`` of the backscatter lobe ``cos^n`` (0: the same at every incidence; 1: Lambertian)."""
    opposition_b0: float | None = spec(None, 0.0, 1.0)
    """Hapke's opposition-surge amplitude B0 of a rough particulate surface: ``backscatter_fraction`` is
    then Hapke's monostatic reflectance at the sensor's wavelength (:mod:`rt_lidar.sensor.hapke`), with
    ``backscatter_exponent`` 0, instead of a number given here."""
    roughness_deg: float = spec(0.0, 0.0, 45.0, "deg")
    """Hapke's macroscopic roughness (1984): the mean slope angle of the surface's facets (a road's
    chips), with ``opposition_b0`` only. At the lidar's phase angle 0 it leaves no shadow and evaluates
    the reflectance at the facets' effective cosine (:func:`rt_lidar.sensor.hapke.rough_cosine`):
    brighter at grazing incidence, a little darker head-on. 0 = a smooth mean plane."""
    grazing_lobe_deg: float = spec(0.0, 0.0, 30.0, "deg")
    """Grazing angle ``g0`` below which a rough surface's monostatic echo grows (its macrotexture's
    shadow hiding at grazing incidence): the echo is scaled by ``max(1, (g0 / g)^n)`` at grazing angle
    ``g`` (:mod:`rt_lidar.physics.grazing_lobe`; 0 = none)."""
    grazing_lobe_exponent: float = spec(2.0, 0.0, 10.0)
    """Exponent ``n`` of that gain."""
    texture_sigma: float = spec(0.0, 0.0, 1.0)
    """Relative spread of the surface's reflectance from place to place (aggregate, patches, wear): a
    log-normal factor of this standard deviation, fixed in world coordinates (0 = uniform)."""
    texture_cell_m: float = spec(0.1, 0.005, 10.0, "m")
    """Size of the texture's cells: the reflectance of neighbouring cells is independent. A pulse's
    footprint averages the cells it covers (:mod:`rt_lidar.kernels.texture`)."""
    texture_patch_sigma: float = spec(0.0, 0.0, 1.0)
    """Log spread of the texture's larger-scale patches (repairs, wear, stains; with ``texture_sigma`` > 0
    only): smooth value noise on a lattice of ``texture_patch_m`` (0 = none)."""
    texture_patch_m: float = spec(1.0, 0.05, 100.0, "m")
    """Lattice spacing of those patches."""
    provenance: dict[str, str] | None = None
    """Where each fitted or measured value came from (field -> source), as a preset's ``[provenance]``."""
    clear_coat_index: float = spec(0.0, 0.0, 3.0)
    """Refractive index of a clear coat over the diffuse base (automotive paint; 0 = none): the base's
    echo passes the coat twice, ``((1 - F(theta)) / (1 - F(0)))^2`` of what it gives head-on
    (:mod:`rt_lidar.physics.clear_coat`)."""
    flake_share: float = spec(0.0, 0.0, 1.0)
    """Share of the head-on echo that a metallic paint's flakes give (0 = a solid paint, Lambertian under
    its coat): the flakes' mirror lobe answers where a flake faces the refracted beam
    (:func:`rt_lidar.physics.clear_coat.paint_factor`)."""
    flake_slope_rms: float = spec(0.25, 0.01, 1.0)
    """RMS slope of the flakes' tilts (Beckmann), the width of their lobe."""
    volume: bool = spec(False)
    """The material makes a volume of small scatterers (a tree crown's leaves): a beam's footprint on it
    straddles scatterers at many depths, so ``--beam full`` casts the bundle for every pulse whose central
    ray ends on it (:func:`rt_lidar.pipeline.beam_full.volume_marks`)."""

    def validate(self, what: Where) -> None:
        """A material reflects at most all the light it gets (diffuse + lobes); a rough-surface
        backscatter lobe takes the place of a retro-reflective one (a material has at most one)."""
        if (self.backscatter_fraction > 0 or self.opposition_b0 is not None) and self.retro_gain > 0:
            raise what.fail_table("has both a rough-surface backscatter and retro_gain: give it one of them")
        if self.roughness_deg > 0 and self.opposition_b0 is None:
            raise what.fail_table("has roughness_deg without opposition_b0 (Hapke's model that takes it)")
        if self.backscatter_fraction > 0 and self.opposition_b0 is not None:
            raise what.fail_table(
                "has both backscatter_fraction and opposition_b0 (which computes it): give it one of them"
            )
        total = float(max(self.spectrum, default=0.0)) + lobe_albedo(
            self.specular_gain, self.specular_exponent, self.retro_gain
        )
        if total > 1.0 + 1e-6:
            raise what.fail_table(
                f"reflects {total:.3g} of the incident power (diffuse + lobes, lobe_albedo); "
                "at most 1 (lower specular_gain or retro_gain)"
            )


@dataclass(frozen=True, kw_only=True)
class _MaterialFile:
    """A material file: wavelengths, and ``[materials.NAME]`` with one reflectance for each."""

    spectrum_nm: tuple[float, ...] = spec(lo=100.0, hi=20_000.0, unit="nm", min_items=2)
    materials: Mapping[str, MaterialSpec] = spec(
        default_factory=dict, min_items=1, items="[materials.NAME] table for each material"
    )

    def validate(self, what: Where) -> None:
        """Wavelengths increase strictly; every spectrum has one reflectance for each."""
        wl = self.spectrum_nm
        if any(b <= a for a, b in itertools.pairwise(wl)):
            raise what.fail(
                "spectrum_nm", f"must list >= 2 wavelengths in nm, strictly increasing; got {list(wl)}"
            )
        for name, m in self.materials.items():
            if len(m.spectrum) != len(wl):
                raise what.fail(
                    f"materials.{name}.spectrum", f"must list {len(wl)} reflectances (one per spectrum_nm)"
                )


_OPTIONAL = {
    f.name: f.default
    for f in dataclasses.fields(MaterialSpec)
    if f.name
    not in ("spectrum", "description", "spectrum_source", "spectrum_scale", "opposition_b0", "provenance")
}


@dataclass(frozen=True)
class MaterialArrays:
    """Per-material properties at one wavelength, as float32 arrays indexed by material number."""

    names: tuple[str, ...]
    diffuse: np.ndarray
    retro_gain: np.ndarray
    retro_exponent: np.ndarray
    specular_gain: np.ndarray
    specular_exponent: np.ndarray
    transmission: np.ndarray
    albedo: np.ndarray | None = None
    """The diffuse reflectance at the wavelength, lobe or not (sunlight, wet roads, other sensors' beams:
    light that does not come back along its own path); None = ``diffuse``."""
    texture_sigma: np.ndarray | None = None
    """Relative spread of reflectance from place to place (None: none anywhere)."""
    texture_cell_m: np.ndarray | None = None
    """Cell size of that texture (m)."""
    texture_patch_sigma: np.ndarray | None = None
    """Log spread of the texture's patches (None: no material has patches)."""
    texture_patch_m: np.ndarray | None = None
    """Lattice spacing of those patches (m)."""
    coat_index: np.ndarray | None = None
    """Refractive index of each material's clear coat, 0 = none (None: no material has one)."""
    flake_share: np.ndarray | None = None
    """Each paint's metallic flakes' share of its head-on echo (None: no material has flakes)."""
    flake_slope_rms: np.ndarray | None = None
    """RMS slope of those flakes' tilts."""
    grazing_lobe_deg: np.ndarray | None = None
    """Each material's grazing lobe's ``g0`` (deg; :mod:`rt_lidar.physics.grazing_lobe`; None: no
    material has one)."""
    grazing_lobe_exponent: np.ndarray | None = None
    """That lobe's exponent ``n``."""
    volume: np.ndarray | None = None
    """(M,) bool: the materials that make a volume of scatterers (:attr:`MaterialSpec.volume`; None: none)."""

    def hemispherical(self) -> np.ndarray:
        """:attr:`albedo`, or ``diffuse`` where the table has no backscatter lobes."""
        return self.albedo if self.albedo is not None else self.diffuse

    def index(self, name: str) -> int:
        """Material number of ``name``."""
        return self.names.index(name)


@dataclass(frozen=True)
class MaterialTable:
    """All materials: a spectrum sampled at ``wavelengths_nm`` plus BRDF terms for each."""

    source: str
    wavelengths_nm: np.ndarray
    materials: dict[str, dict[str, Any]]

    @property
    def names(self) -> list[str]:
        """Material names in table order."""
        return list(self.materials)

    def reflectance(self, name: str, wavelength_nm: float) -> float:
        """Diffuse reflectivity (0..1) of ``name`` at ``wavelength_nm`` (linear interpolation)."""
        if name not in self.materials:
            raise ConfigError(f"{self.source}: unknown material '{name}' (known: {', '.join(self.names)})")
        lo, hi = float(self.wavelengths_nm[0]), float(self.wavelengths_nm[-1])
        if not lo <= wavelength_nm <= hi:
            raise ConfigError(
                f"{self.source}: wavelength {wavelength_nm} nm outside the table's [{lo}, {hi}] nm"
            )
        return float(np.interp(wavelength_nm, self.wavelengths_nm, self.materials[name]["spectrum"]))

    def arrays(self, names: list[str] | tuple[str, ...], wavelength_nm: float) -> MaterialArrays:
        """Property arrays for ``names`` (e.g. the world's material list) at ``wavelength_nm``.

        Names the table does not know are an error, so a scene cannot silently render with a default.
        """
        unknown = [n for n in names if n not in self.materials]
        if unknown:
            raise ConfigError(
                f"{self.source}: scene uses materials not in the table: {', '.join(unknown)} "
                f"(known: {', '.join(self.names)})"
            )

        def col(key: str) -> np.ndarray:
            return np.array([float(self.materials[n].get(key, _OPTIONAL[key])) for n in names], np.float32)

        rho = np.array([self.reflectance(n, wavelength_nm) for n in names], np.float32)
        w = col("backscatter_fraction")
        rough = w > 0
        diffuse = np.where(rough, rho * (np.float32(1) - w), rho).astype(np.float32)
        retro = np.where(rough, rho * w, col("retro_gain")).astype(np.float32)
        for i, n in enumerate(names):  # Hapke's monostatic reflectance at this wavelength
            b0 = self.materials[n].get("opposition_b0")
            if b0 is not None:
                rough_deg = float(self.materials[n].get("roughness_deg", 0.0))
                diffuse[i], retro[i] = road_lobes(float(rho[i]), float(b0), roughness_deg=rough_deg)
                rough[i] = True
        texture = col("texture_sigma")
        patches = col("texture_patch_sigma")
        coat = col("clear_coat_index")
        flakes = col("flake_share")
        grazing = col("grazing_lobe_deg")
        grazed = bool((grazing > 0).any())
        return MaterialArrays(
            names=tuple(names),
            diffuse=diffuse,
            retro_gain=retro,
            retro_exponent=np.where(rough, self._backscatter_exponents(names), col("retro_exponent")).astype(
                np.float32
            ),
            specular_gain=col("specular_gain"),
            specular_exponent=col("specular_exponent"),
            transmission=col("transmission"),
            albedo=rho if bool(rough.any()) else None,
            texture_sigma=texture if bool((texture > 0).any()) else None,
            texture_cell_m=col("texture_cell_m"),
            texture_patch_sigma=patches if bool((patches > 0).any()) else None,
            texture_patch_m=col("texture_patch_m"),
            coat_index=coat if bool((coat > 0).any()) or bool((flakes > 0).any()) else None,
            flake_share=flakes if bool((flakes > 0).any()) else None,
            flake_slope_rms=col("flake_slope_rms") if bool((flakes > 0).any()) else None,
            grazing_lobe_deg=grazing if grazed else None,
            grazing_lobe_exponent=col("grazing_lobe_exponent") if grazed else None,
            volume=col("volume") > 0,
        )

    def _backscatter_exponents(self, names: list[str] | tuple[str, ...]) -> np.ndarray:
        """Each material's backscatter lobe exponent: 0 where Hapke's model gives the lobe."""
        return np.array(
            [
                0.0
                if self.materials[n].get("opposition_b0") is not None
                else float(self.materials[n].get("backscatter_exponent", 1.0))
                for n in names
            ],
            np.float32,
        )


def _validate(source: str, data: dict[str, Any]) -> MaterialTable:
    """The table of a parsed material file, every field checked by the one schema."""
    f: _MaterialFile = build(_MaterialFile, data, source)
    out = {
        name: {**dataclasses.asdict(m), "spectrum": np.asarray(m.spectrum, dtype=float)}
        for name, m in f.materials.items()
    }
    return MaterialTable(source=source, wavelengths_nm=np.asarray(f.spectrum_nm, dtype=float), materials=out)


def load_material_table(path: str | Path | None = None) -> MaterialTable:
    """Load and validate a material table; the packaged one when ``path`` is None."""
    if path is None:
        ref = resources.files("rt_lidar.sensor_presets").joinpath("materials.toml")
        source, text = "sensor_presets/materials.toml", ref.read_text()
    else:
        source, text = str(path), Path(path).read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    return _validate(source, data)
