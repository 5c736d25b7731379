"""``--beam full`` over the bridge: a server's central rays and chosen bundles as one answer, both ways.

The server (which has the world) casts every firing's central ray, picks the pulses whose footprint needs
the bundle (:func:`~rt_lidar.pipeline.beam_full.bundle_pulses`) and casts only those as the bundle
(:func:`~rt_lidar.pipeline.beam_full.full_beam_hits`). :func:`full_beam_to_wire` writes both into one
``rtLidarGetBeamHits`` answer: the first P rows every firing's central ray, then the N-ray bundles of the
chosen firings, pulse-major, the split in ``info.full_beam``
(:data:`~rt_lidar.unreal_bridge.beam_call.FULL_BEAM_INFO`). :func:`full_beam_from_wire` gives the client
the same :class:`~rt_lidar.pipeline.sources.Hits` with its :class:`~rt_lidar.pipeline.sources.BeamBundle`
that the in-process source gives, so the physics runs it as in-process (:mod:`rt_lidar.physics.beam_full`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from rt_lidar.bridge.hits import hits_from_wire, hits_to_wire
from rt_lidar.pipeline.beam_full import take_firings
from rt_lidar.pipeline.sources import BeamBundle, Hits
from rt_lidar.sensor.scan_pattern import Firings
from rt_lidar.unreal_bridge import FluPose, LidarHits
from rt_lidar.unreal_bridge.beam_call import FULL_BEAM_INFO
from rt_lidar.unreal_bridge.wire import FIRING_FIELDS

__all__ = ["full_beam_from_wire", "full_beam_to_wire", "is_full_beam_answer"]

_ROW_FIELDS = ("points", "normals", "segmentation", "ring", "time", "range", "miss")


def full_beam_to_wire(
    hits: Hits,
    pose: FluPose,
    time_stamp_ns: int,
    info: dict[str, Any],
    by_reason: dict[str, int],
    omit: frozenset[str] = frozenset(),
) -> LidarHits:
    """The answer of a ``--beam full`` cast ``hits`` (every firing's central ray, ``hits.bundle`` the
    chosen pulses' bundles): central rows, then bundle rows; ``by_reason`` how many pulses each reason
    marked. The firing fields are always sent (the bundle rows are not the firings)."""
    omit = omit - FIRING_FIELDS
    bundle = hits.bundle
    central = hits_to_wire(dataclasses.replace(hits, bundle=None), pose, time_stamp_ns, info=info, omit=omit)
    extras = dict(central.extras)
    extras["pulse_direction"] = np.ascontiguousarray(hits.firings.directions(), np.float32)
    head = dict(central.info)
    weights = None if bundle is None else bundle.hits.subray_weight
    head[FULL_BEAM_INFO] = {
        "pulses": int(hits.pulses),
        "sub_rays": 1 if bundle is None else int(bundle.hits.subrays),
        "subray_weights": [] if weights is None else [float(w) for w in weights],
        "bundle_pulses": [] if bundle is None else [int(i) for i in bundle.pulses],
        "by_reason": {str(k): int(v) for k, v in by_reason.items()},
    }
    if bundle is None:
        return dataclasses.replace(central, extras=extras, info=head)
    sub = hits_to_wire(bundle.hits, pose, time_stamp_ns, omit=omit)
    if set(sub.extras) != set(extras):
        raise ValueError(f"full beam: the bundle's fields {sorted(sub.extras)} differ from {sorted(extras)}")
    joined: dict[str, Any] = {f: np.concatenate([getattr(central, f), getattr(sub, f)]) for f in _ROW_FIELDS}
    return dataclasses.replace(
        central,
        **joined,
        extras={k: np.concatenate([v, np.asarray(sub.extras[k], v.dtype)]) for k, v in extras.items()},
        info=head,
    )


def is_full_beam_answer(answer: LidarHits) -> bool:
    """Whether ``answer`` is a ``--beam full`` answer (its header has ``info.full_beam``)."""
    return FULL_BEAM_INFO in answer.info


def _rows(answer: LidarHits, rows: slice, info: dict[str, Any]) -> LidarHits:
    taken: dict[str, Any] = {f: getattr(answer, f)[rows] for f in _ROW_FIELDS}
    return dataclasses.replace(
        answer,
        **taken,
        extras={k: v[rows] for k, v in answer.extras.items()},
        info=info,
    )


def full_beam_from_wire(answer: LidarHits, expected: Firings | None = None) -> tuple[Hits, dict[str, int]]:
    """The hits of a ``--beam full`` answer (every firing's central ray, the chosen pulses' bundles in
    :attr:`Hits.bundle`), and how many pulses each reason marked. ``expected``: as for
    :func:`~rt_lidar.bridge.hits.hits_from_wire` (this side's firings, taken when the answer's are those);
    the bundles' firings are the central firings they belong to. Raises ValueError for a header that does
    not fit the rows."""
    head = answer.info[FULL_BEAM_INFO]
    try:
        pulses = int(head["pulses"])
        sub = int(head["sub_rays"])
        chosen = np.asarray(head["bundle_pulses"], np.int64).ravel()
        weights = [float(w) for w in head["subray_weights"]]
        by_reason = {str(k): int(v) for k, v in dict(head.get("by_reason", {})).items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"rtLidarGetBeamHits: a bad info.{FULL_BEAM_INFO}: {exc}") from None
    rows = answer.miss.shape[0]
    ordered = bool(
        chosen.size == 0 or (np.all(np.diff(chosen) > 0) and chosen[0] >= 0 and chosen[-1] < pulses)
    )
    if not (0 <= pulses <= rows and ordered and rows == pulses + chosen.size * sub):
        raise ValueError(
            f"rtLidarGetBeamHits: info.{FULL_BEAM_INFO} of {pulses} pulses and {chosen.size} bundles of "
            f"{sub} does not fit the answer's {rows} rays"
        )
    base = {k: v for k, v in answer.info.items() if k != FULL_BEAM_INFO}
    central = hits_from_wire(_rows(answer, slice(0, pulses), base), expected=expected)
    if chosen.size:
        bundle_info = {**base, "sub_rays": sub, "subray_weights": weights}
        bundle = hits_from_wire(_rows(answer, slice(pulses, rows), bundle_info))
        bundle.firings = take_firings(central.firings, chosen)
        bundle.pose_samples = central.pose_samples
        central.bundle = BeamBundle(chosen, bundle)
    return central, by_reason
