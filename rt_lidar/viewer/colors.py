"""Point colours for the viewer's colour modes, the (N, 3) positions GL wants and the range-image
panel: NumPy only, no Qt.

Continuous modes go through a 256-entry table of the project's colormap; categorical ones (ring,
return id, flags) through small palettes indexed by the field itself. Every function returns
contiguous float32 arrays, as ``GLScatterPlotItem.setData`` wants them (it then keeps them as they
are, no copy). The work is a handful of single passes in float32 with ``out=`` buffers and
``take(..., mode="clip")`` gathers (the default ``mode="raise"`` buffers its output and is ~3x
slower); :class:`CloudBuffers` keeps those buffers from frame to frame, so a 1.3 M-point scan costs
no fresh allocations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rt_lidar.errors import ConfigError
from rt_lidar.points import PointFlag
from rt_lidar.sinks.range_image import colormap

__all__ = [
    "COLOR_MODES",
    "FLAG_COLORS",
    "RETURN_COLORS",
    "SENSOR_COLORS",
    "SENSOR_COLOR_NAMES",
    "CloudBuffers",
    "ColorScales",
    "color_legend",
    "intensity_mask_rgb",
    "point_colors",
    "point_positions",
    "range_image_rgb",
    "range_panel_rgb",
    "range_panel_stride",
]

F32 = NDArray[np.float32]
U8 = NDArray[np.uint8]

COLOR_MODES: tuple[str, ...] = ("intensity", "reflectivity", "ring", "range", "return_id", "flags", "sensor")
"""Colour modes, in the order of the keys 1..7."""

_LUT = np.concatenate([colormap(np.linspace(0.0, 1.0, 256)).astype(np.float32) / 255.0, np.ones((256, 1))], 1)
_LUT = np.ascontiguousarray(_LUT, dtype=np.float32)

_PANEL_LUT = np.concatenate([colormap(np.linspace(0.0, 1.0, 256)), np.zeros((1, 3), np.uint8)])
"""The range panel's 256 colours and, at index 256, black (no return)."""

RETURN_COLORS = np.array(
    [[0.30, 0.65, 1.00, 1.0], [1.00, 0.55, 0.10, 1.0], [0.35, 0.90, 0.35, 1.0], [0.90, 0.30, 0.90, 1.0]],
    np.float32,
)
"""Return 0 (first/strongest) blue, 1 orange, 2 green, 3+ magenta."""

FLAG_COLORS: tuple[tuple[PointFlag, tuple[float, float, float, float]], ...] = (
    (PointFlag.SATURATED, (1.00, 0.15, 0.15, 1.0)),
    (PointFlag.BLOOM, (1.00, 0.20, 0.90, 1.0)),
    (PointFlag.RAIN_CLUTTER, (0.10, 0.90, 1.00, 1.0)),
    (PointFlag.SNOW_CLUTTER, (1.00, 1.00, 1.00, 1.0)),
    (PointFlag.FOG_CLUTTER, (0.70, 0.75, 0.95, 1.0)),
    (PointFlag.AMBIENT_NOISE, (1.00, 0.90, 0.10, 1.0)),
    (PointFlag.THROUGH_GLASS, (0.30, 1.00, 0.40, 1.0)),
)
"""Colour of each flag, highest priority first; unflagged points are dim grey."""
_UNFLAGGED = np.array([0.45, 0.45, 0.45, 1.0], np.float32)
FAULT_COLOR = (1.00, 0.55, 0.00, 1.0)
"""Points an injected fault touched (bits 8-15, :mod:`rt_lidar.faults`) with no flag of their own."""


def _flag_palette() -> F32:
    """The colour of every flags value (uint16): its highest-priority flag's, grey when none is set."""
    values = np.arange(1 << 16)
    pal = np.empty((1 << 16, 4), np.float32)
    pal[:] = _UNFLAGGED
    pal[(values >> 8) != 0] = FAULT_COLOR
    for bit, rgba in reversed(FLAG_COLORS):  # lowest priority first, so the highest ends on top
        pal[(values & int(bit)) != 0] = rgba
    return pal


_FLAG_PALETTE = _flag_palette()

SENSOR_COLORS = np.array(
    [
        [1.00, 0.85, 0.20, 1.0],
        [0.25, 0.75, 1.00, 1.0],
        [1.00, 0.35, 0.35, 1.0],
        [0.40, 0.95, 0.45, 1.0],
        [0.85, 0.50, 1.00, 1.0],
        [1.00, 0.60, 0.15, 1.0],
        [0.30, 1.00, 0.90, 1.0],
        [0.95, 0.95, 0.95, 1.0],
    ],
    np.float32,
)
"""Colour mode ``sensor``: the rig's sensor ``i`` (header ``sensor_index``) in ``SENSOR_COLORS[i % 8]``:
yellow, blue, red, green, violet, orange, cyan, white."""
SENSOR_COLOR_NAMES = ("yellow", "blue", "red", "green", "violet", "orange", "cyan", "white")


@dataclass(frozen=True)
class ColorScales:
    """What maps values to 0..1: the sensor's intensity full scale, the range shown, the ring count."""

    intensity_max: float = 255.0
    range_max_m: float = 80.0
    n_rings: int = 64
    sensor_index: int = 0
    """The rig sensor the scan comes from (colour mode ``sensor``)."""


def _lut_into(scaled: F32, idx: NDArray[np.intp], out: F32) -> F32:
    """``out[i] = _LUT[clip(trunc(scaled[i]), 0, 255)]`` (NaN -> 0); ``scaled`` is overwritten."""
    np.fmax(scaled, 0.0, out=scaled)  # fmax, not maximum: NaN -> 0
    np.fmin(scaled, 255.0, out=scaled)
    np.copyto(idx, scaled, casting="unsafe")  # truncates, as astype(uint8) did
    return np.take(_LUT, idx, axis=0, out=out, mode="clip")


def _palette_into(palette: F32, field: np.ndarray, idx: NDArray[np.intp], out: F32) -> F32:
    """``out[i] = palette[min(field[i], len(palette) - 1)]`` for an unsigned integer ``field``."""
    np.copyto(idx, field, casting="unsafe")
    return np.take(palette, idx, axis=0, out=out, mode="clip")


def _ring_palette(n_rings: int) -> F32:
    div = max(n_rings - 1, 1)
    k = np.arange(div + 1, dtype=np.float32) / div  # ring / (rings - 1); rings past the last clip to it
    return _LUT[np.clip(k * 255.0, 0.0, 255.0).astype(np.uint8)]


def _squared_ranges_into(points: np.ndarray, positions: F32 | None, out: F32) -> F32:
    if positions is not None:
        return np.einsum("ij,ij->i", positions, positions, out=out)
    x, y, z = points["x"], points["y"], points["z"]
    np.multiply(x, x, out=out)
    out += y * y
    out += z * z
    return out


def _colors_into(
    points: np.ndarray,
    mode: str,
    s: ColorScales,
    out: F32,
    scratch: F32,
    idx: NDArray[np.intp],
    positions: F32 | None = None,
) -> F32:
    if mode not in COLOR_MODES:
        raise ConfigError(f"unknown colour mode '{mode}'; known: {', '.join(COLOR_MODES)}")
    if points.shape[0] == 0:
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        if mode == "intensity":
            # square root: returns span orders of magnitude, the dark end would swallow most of them;
            # 255 * sqrt(i / i_max) = sqrt(i * 255^2 / i_max)
            np.multiply(points["intensity"], 255.0**2 / max(s.intensity_max, 1e-12), out=scratch)
            np.fmax(scratch, 0.0, out=scratch)
            np.sqrt(scratch, out=scratch)
            return _lut_into(scratch, idx, out)
        if mode == "reflectivity":
            np.multiply(points["reflectivity"], 255.0, out=scratch)
            return _lut_into(scratch, idx, out)
        if mode == "range":
            _squared_ranges_into(points, positions, scratch)
            scratch *= (255.0 / max(s.range_max_m, 1e-6)) ** 2
            np.fmax(scratch, 0.0, out=scratch)
            np.sqrt(scratch, out=scratch)
            return _lut_into(scratch, idx, out)
    if mode == "ring":
        return _palette_into(_ring_palette(s.n_rings), points["ring"], idx, out)
    if mode == "return_id":
        return _palette_into(RETURN_COLORS, points["return_id"], idx, out)
    if mode == "sensor":
        out[:] = SENSOR_COLORS[s.sensor_index % len(SENSOR_COLORS)]
        return out
    return _palette_into(_FLAG_PALETTE, points["flags"], idx, out)  # flags


def color_legend(mode: str, scales: ColorScales | None = None) -> str:
    """What the colours of ``mode`` mean, in a line (the HUD shows it)."""
    s = scales or ColorScales()
    if mode == "intensity":
        return f"dark..bright = 0..{s.intensity_max:g} (sqrt scale)"
    if mode == "reflectivity":
        return "dark..bright = 0..1 of Lambertian"
    if mode == "range":
        return f"dark..bright = 0..{s.range_max_m:g} m"
    if mode == "ring":
        return f"dark..bright = ring 0..{s.n_rings - 1}"
    if mode == "return_id":
        return "blue 1st/strongest, orange 2nd, green 3rd, magenta 4th+"
    if mode == "flags":
        return (
            "red saturated, pink bloom, cyan rain, white snow, lavender fog, yellow sun, green glass, "
            "orange an injected fault, grey"
        )
    if mode == "sensor":
        return "one colour per sensor of the rig (its HUD line names it)"
    raise ConfigError(f"unknown colour mode '{mode}'; known: {', '.join(COLOR_MODES)}")


def point_colors(
    points: np.ndarray, mode: str, scales: ColorScales | None = None, *, positions: F32 | None = None
) -> F32:
    """(N, 4) RGBA float32 colours of structured ``points`` in colour ``mode`` (one of COLOR_MODES).

    ``positions`` (``point_positions(points)``, when at hand) makes the range mode cheaper."""
    n = points.shape[0]
    out = np.empty((n, 4), np.float32)
    return _colors_into(
        points, mode, scales or ColorScales(), out, np.empty(n, np.float32), np.empty(n, np.intp), positions
    )


def _xyz_view(points: np.ndarray) -> np.ndarray | None:
    """An (N, 3) float32 strided view of x, y, z when they are packed float32 fields, else None."""
    fields: Mapping[str, Any] = points.dtype.fields or {}
    offsets = [fields[f][1] for f in ("x", "y", "z")]
    packed = all(fields[f][0] == np.float32 for f in ("x", "y", "z"))
    if packed and offsets == [offsets[0], offsets[0] + 4, offsets[0] + 8]:
        return np.lib.stride_tricks.as_strided(
            points["x"], shape=(points.shape[0], 3), strides=(points.strides[0], 4), writeable=False
        )
    return None


def _positions_into(points: np.ndarray, out: F32) -> F32:
    base = _xyz_view(points)
    if base is not None:
        np.copyto(out, base)
    else:
        for i, f in enumerate(("x", "y", "z")):
            out[:, i] = points[f]
    return out


def point_positions(points: np.ndarray) -> F32:
    """(N, 3) contiguous float32 x, y, z of structured ``points`` (one strided copy)."""
    if points.size == 0:
        return np.zeros((0, 3), np.float32)
    return _positions_into(points, np.empty((points.shape[0], 3), np.float32))


class CloudBuffers:
    """The viewer's per-frame arrays, kept from frame to frame: positions, colours and the scratch
    the colour modes need. What :meth:`positions` and :meth:`colors` return are views of these
    buffers, valid until the next call (``GLScatterPlotItem`` uploads them at its next paint)."""

    def __init__(self) -> None:
        self.capacity = 0
        self._alloc(0)

    def _alloc(self, cap: int) -> None:
        self.capacity = cap
        self._pos = np.empty((cap, 3), np.float32)
        self._rgba = np.empty((cap, 4), np.float32)
        self._scratch = np.empty(cap, np.float32)
        self._idx = np.empty(cap, np.intp)

    def reserve(self, n: int) -> None:
        """Room for ``n`` points (grown with 1/8 headroom, so scans of varying size reuse it)."""
        if n > self.capacity:
            self._alloc(n + n // 8)

    def positions(self, points: np.ndarray) -> F32:
        """(N, 3) contiguous float32 x, y, z of ``points``, in the reused buffer."""
        n = points.shape[0]
        self.reserve(n)
        return _positions_into(points, self._pos[:n])

    def colors(
        self, points: np.ndarray, mode: str, scales: ColorScales | None = None, positions: F32 | None = None
    ) -> F32:
        """(N, 4) RGBA float32 colours of ``points`` in ``mode``, in the reused buffer (as
        :func:`point_colors`)."""
        n = points.shape[0]
        self.reserve(n)
        return _colors_into(
            points, mode, scales or ColorScales(), self._rgba[:n], self._scratch[:n], self._idx[:n], positions
        )


_PANEL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47)


def range_panel_stride(n: int, pixels: int, rings: int) -> int:
    """Every how many points the range panel reads: 1 (all) unless a scan has more than four points a
    pixel; then the largest prime ``k <= n / (2 * pixels)`` that does not divide the ring count.

    Points come in firing order (one point per ring and firing, or a few): a stride that is prime to
    the ring count visits every ring, each at every ``k``-th firing, which still leaves two or more
    points a pixel. The panel is a thumbnail; the cloud always shows every point."""
    limit = n / (2.0 * max(pixels, 1))
    k = 1
    for p in _PANEL_PRIMES:
        if p > limit:
            break
        if rings % p:
            k = p
    return k


def range_panel_rgb(
    points: np.ndarray,
    header: Mapping[str, Any],
    positions: F32 | None = None,
    max_columns: int | None = None,
) -> U8:
    """(rows, columns, 3) uint8 range image of a scan (row 0 the highest beam, middle column ahead,
    black where no return); ``positions`` (``point_positions(points)``) saves a strided pass.

    Columns span the sensor's horizontal field of view (``azimuth_span_deg`` in the header: 360 for a
    spinning head, from behind to behind; the mirror or raster's field ahead otherwise). Rows are the
    rings, or, for a pattern without rings (``elevation_span_deg``: a rosette), elevation over its field.
    The colour is the colormap of sqrt(range / range_max) in 256 steps. ``max_columns`` (the panel's
    width on screen) caps the header's column count: finer columns would only be scaled away. A scan
    with many more points than pixels is read at a stride (:func:`range_panel_stride`)."""
    elev = np.asarray(header.get("elevations_deg") or [0.0], np.float64)
    columns = max(1, int(header.get("columns", 1024)))
    if max_columns is not None:
        columns = max(1, min(columns, int(max_columns)))
    span_h = float(header.get("azimuth_span_deg") or 360.0)
    span_v = header.get("elevation_span_deg")
    rings = elev.size if not span_v else columns
    img = np.full(rings * columns, np.nan, np.float32)
    n = points.shape[0]
    if n:
        k = range_panel_stride(n, rings * columns, elev.size)
        xyz = positions[::k] if positions is not None else point_positions(points[::k])
        # column: (span / 2 - azimuth) / span * columns, in float32 (behind-to-behind for a full turn)
        col_f = np.arctan2(xyz[:, 1], xyz[:, 0])
        col_f *= -columns / np.radians(span_h)
        col_f += columns / 2.0
        if span_v:  # rows by elevation over the field, as many as columns
            row_f = np.arctan2(xyz[:, 2], np.hypot(xyz[:, 0], xyz[:, 1]))
            row_f *= -rings / np.radians(float(span_v))
            row_f += rings / 2.0
            inside = (row_f >= 0) & (row_f < rings) & (col_f >= 0) & (col_f < columns)
            flat = row_f[inside].astype(np.intp) * columns + col_f[inside].astype(np.intp)
            xyz = xyz[inside]
        else:
            order = np.argsort(-elev)
            row_of_ring = np.empty(rings, np.intp)
            row_of_ring[order] = np.arange(rings)
            ring = points["ring"][::k]
            if span_h < 360.0:  # a field ahead: what lies outside it is not drawn
                inside = (col_f >= 0) & (col_f < columns)
                col_f, ring, xyz = col_f[inside], ring[inside], xyz[inside]
            col = col_f.astype(np.intp)
            col %= columns  # azimuth exactly -180 deg lands on column 0
            flat = np.take(row_of_ring * columns, ring, mode="clip")
            flat += col
        # the panel's value sqrt(r / vmax) * 255 = (r^2)^(1/4) * 255 / sqrt(vmax)
        vmax = min(float(header.get("range_max_m", 80.0)), 80.0)
        v = np.einsum("ij,ij->i", xyz, xyz)
        np.sqrt(v, out=v)
        np.sqrt(v, out=v)
        v *= 255.0 / np.sqrt(max(vmax, 1e-6))
        v += 0.5  # round to the nearest of the 256 steps
        img[flat] = v
    idx = np.full(img.shape, 256, np.intp)  # black
    seen = ~np.isnan(img)
    idx[seen] = np.clip(img[seen], 0.0, 255.0).astype(np.intp)
    return np.take(_PANEL_LUT, idx, axis=0, mode="clip").reshape(rings, columns, 3)


def intensity_mask_rgb(mask: np.ndarray) -> U8:
    """(H, W, 3) uint8 of a camera's intensity mask: the colormap of sqrt(m / max(m)) in 256 steps,
    black where m <= 0 (the ray dropped) and everywhere when the mask has no positive value."""
    m = np.asarray(mask, np.float32)
    idx = np.full(m.shape, 256, np.intp)  # black
    peak = float(np.max(m)) if m.size else 0.0
    if peak > 0:  # NaN is not
        lit = m > 0
        with np.errstate(invalid="ignore"):
            v = np.sqrt(m[lit] / np.float32(peak))
        v *= 255.0
        v += 0.5
        ok = np.isfinite(v)
        lit_idx = np.full(v.shape, 256, np.intp)
        lit_idx[ok] = np.minimum(v[ok], 255.0).astype(np.intp)
        idx[lit] = lit_idx
    return np.take(_PANEL_LUT, idx, axis=0, mode="clip")


def range_image_rgb(image: np.ndarray, vmax: float) -> NDArray[np.uint8]:
    """(rings, columns, 3) uint8 RGB of a range image (NaN = no return, black)."""
    return colormap(image / max(float(vmax), 1e-12))
