"""Range images: the scan unrolled as rings x azimuth, written as a coloured PNG with a legend (the
field shown, its unit and a colour bar) drawn with Pillow alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont, PngImagePlugin

from rt_lidar.sinks.atomic import atomic_write

__all__ = ["FIELD_UNITS", "colormap", "range_image", "write_range_image_png"]

# Anchor colours of a perceptually ordered dark-blue -> green -> yellow map (positions 0, .25, .5, .75, 1).
_ANCHORS = np.array(
    [[0.19, 0.07, 0.23], [0.16, 0.47, 0.93], [0.14, 0.85, 0.60], [0.87, 0.86, 0.21], [0.98, 0.40, 0.10]]
)


def colormap(values: np.ndarray) -> np.ndarray:
    """RGB uint8 colours of values in [0, 1] (NaN -> black)."""
    v = np.clip(np.nan_to_num(values, nan=-1.0), -1.0, 1.0)
    pos = np.linspace(0.0, 1.0, len(_ANCHORS))
    rgb = np.stack([np.interp(np.clip(v, 0, 1), pos, _ANCHORS[:, c]) for c in range(3)], axis=-1)
    rgb[v < 0] = 0.0
    return (rgb * 255.0 + 0.5).astype(np.uint8)


def range_image(
    points: np.ndarray,
    elevations_deg: np.ndarray,
    columns: int,
    field: str = "intensity",
    azimuth_span_deg: float = 360.0,
) -> np.ndarray:
    """(rings, columns) float32 image of ``field`` (NaN where no return); row 0 is the highest beam.

    The columns span ``azimuth_span_deg`` centred straight ahead: for a full turn column 0 is azimuth
    +180 deg (behind), as a viewer expects; for a sensor that looks ahead, its field (points outside it
    are left out).
    """
    order = np.argsort(-np.asarray(elevations_deg))
    row_of_ring = np.empty_like(order)
    row_of_ring[order] = np.arange(order.size)
    img = np.full((order.size, columns), np.nan, np.float32)
    if points.size == 0:
        return img
    az = np.degrees(np.arctan2(points["y"], points["x"]))
    col_f = (azimuth_span_deg / 2.0 - az) / azimuth_span_deg * columns
    if azimuth_span_deg < 360.0:
        inside = (col_f >= 0) & (col_f < columns)
        points, col_f = points[inside], col_f[inside]
    col = col_f.astype(np.int64) % columns
    rows = row_of_ring[points["ring"].astype(np.int64)]
    img[rows, col] = points[field]
    return img


FIELD_UNITS = {"intensity": "sensor units", "reflectivity": "of Lambertian", "range": "m"}
"""The unit the legend names for a field of the point type (others: none)."""

_BACKGROUND = (24, 24, 24)
_TEXT = (235, 235, 235)
_LEGEND_MIN_WIDTH = 360
"""A narrow image (a solid-state sensor's few columns) gets a legend this wide, so its text fits."""


def write_range_image_png(
    path: str | Path, image: np.ndarray, vmax: float, row_scale: int = 4, field: str = "intensity"
) -> Path:
    """Write a range image coloured by value / ``vmax``, each row repeated ``row_scale`` times, above a
    legend that names ``field`` (and its unit) and carries a colour bar from 0 to ``vmax`` (black: no
    return). The PNG's text chunks say the same (``field``, ``vmin``, ``vmax``)."""
    rgb = colormap(image / float(vmax))
    rgb = np.repeat(rgb, max(1, row_scale), axis=0)
    picture = _with_legend(Image.fromarray(rgb, "RGB"), field, float(vmax))
    info = PngImagePlugin.PngInfo()
    info.add_text("field", field)
    info.add_text("vmin", "0")
    info.add_text("vmax", f"{float(vmax):g}")
    info.add_text("no_return", "black")
    with atomic_write(path) as fh:
        picture.save(fh, format="PNG", pnginfo=info)
    return Path(path)


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)  # Pillow >= 10.1 with FreeType: a scalable font
    except (TypeError, OSError, ImportError):
        return ImageFont.load_default()


def _with_legend(scan: Image.Image, field: str, vmax: float) -> Image.Image:
    """``scan`` with a legend strip under it: the field's name and unit, a colour bar, its ticks."""
    width = max(scan.width, _LEGEND_MIN_WIDTH)
    margin, bar_h, legend_h = 12, 12, 58
    canvas = Image.new("RGB", (width, scan.height + legend_h), _BACKGROUND)
    canvas.paste(scan, ((width - scan.width) // 2, 0))
    draw = ImageDraw.Draw(canvas)
    font = _font(12)
    unit = FIELD_UNITS.get(field)
    title = f"{field} ({unit}), colour scale 0 to {vmax:g}; black: no return" if unit else field
    draw.text((margin, scan.height + 4), title, fill=_TEXT, font=font)
    bar_w = width - 2 * margin
    bar = colormap(np.linspace(0.0, 1.0, bar_w))[None, :, :].repeat(bar_h, axis=0)
    bar_top = scan.height + 22
    canvas.paste(Image.fromarray(bar, "RGB"), (margin, bar_top))
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = margin + round(frac * (bar_w - 1))
        draw.line([(x, bar_top + bar_h), (x, bar_top + bar_h + 3)], fill=_TEXT)
        label = f"{frac * vmax:g}"
        text_w = draw.textlength(label, font=font)
        left = min(max(x - text_w / 2, 0), width - text_w)
        draw.text((left, bar_top + bar_h + 5), label, fill=_TEXT, font=font)
    return canvas
