"""The detections of a ``--beam full`` batch (:mod:`rt_lidar.pipeline.beam_full`).

The batch's :class:`~rt_lidar.pipeline.sources.Hits` are every pulse's central ray, and its ``bundle``
the pulses cast again as the whole sub-ray bundle. The pulses without a bundle go through the single-ray
model (one sub-ray of full weight: the waveform of one ray in the multi-return modes, the stronger of the
glass and object echoes in ``strongest``); the bundled ones through the sub-ray waveform. Their returns
are merged back in (pulse, return) order, so everything after detection (range walk, range noise, the
receiver's false alarms, packing) sees one batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rt_lidar.kernels.waveform import single_echo_epw_ns
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.returns import Detections, waveform_detections
from rt_lidar.pipeline.beam_full import take_pulses
from rt_lidar.pipeline.sources import Hits

if TYPE_CHECKING:
    from rt_lidar.physics.model import SensorPhysics

__all__ = ["full_beam_detections", "merge_detections"]


def merge_detections(parts: list[tuple[np.ndarray, Detections]]) -> Detections:
    """One :class:`Detections` of ``(pulse indices, detections of those pulses)`` parts, the pulses
    renumbered to the whole batch and sorted by (pulse, return id)."""
    pulse = np.concatenate([idx[d.pulse] for idx, d in parts]).astype(np.int64)
    rid = np.concatenate([d.return_id for _, d in parts])
    order = np.lexsort((rid, pulse))

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(d, name) for _, d in parts])[order]

    with_epw = all(d.epw_ns is not None for _, d in parts)
    return Detections(
        pulse=pulse[order],
        return_id=rid[order],
        range_m=cat("range_m"),
        power_w=cat("power_w"),
        reflectivity=cat("reflectivity"),
        segment=cat("segment"),
        flags=cat("flags"),
        epw_ns=cat("epw_ns") if with_epw else None,
    )


def full_beam_detections(
    physics: SensorPhysics,
    echo: EchoModel,
    hits: Hits,
    rng: np.random.Generator,
    sigma: np.ndarray | None,
) -> Detections:
    """Detections of the ``--beam full`` batch ``hits`` (module docstring); ``sigma`` the pulses' noise
    floors (P,) or None."""
    bundle = hits.bundle
    assert bundle is not None
    p = physics.preset
    n = hits.pulses
    in_bundle = np.zeros(n, bool)
    in_bundle[bundle.pulses] = True
    plain = np.flatnonzero(~in_bundle)
    cfg = physics.config
    parts: list[tuple[np.ndarray, Detections]] = []
    if plain.size:
        plain_hits = take_pulses(hits, plain)
        plain_sigma = None if sigma is None else sigma[plain]
        if physics.uses_waveform(plain_hits):
            det = waveform_detections(
                echo,
                plain_hits,
                rng,
                mode=physics.return_mode,
                weather=cfg.weather,
                epw=physics.beam.epw,
                sigma=plain_sigma,
                device=cfg.kernels_device,
            )
        else:
            det = physics._single(echo, plain_hits, rng, plain_sigma)
            if physics.beam.epw:
                det.epw_ns = single_echo_epw_ns(
                    det.power_w, p.pulse.detection_threshold_w, p.pulse.width_ns, p.pulse.epw_offset_ns
                ).astype(np.float32)
        parts.append((plain, det))
    det_b = waveform_detections(
        echo,
        bundle.hits,
        rng,
        mode=physics.return_mode,
        weather=cfg.weather,
        epw=physics.beam.epw,
        sigma=None if sigma is None else sigma[bundle.pulses],
        device=cfg.kernels_device,
    )
    parts.append((bundle.pulses, det_b))
    return merge_detections(parts)
