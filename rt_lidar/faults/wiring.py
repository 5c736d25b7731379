"""How a run's faults reach its parts: the pipeline's hits, the scans after ``post``, the stream
sinks' messages and (through :attr:`SinkContext.faults`) the packet sinks' datagrams."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from rt_lidar.faults.network import FaultyStream, NetworkFaults
from rt_lidar.faults.plan import FaultPlan
from rt_lidar.faults.spec import Fault
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sinks.base import ScanSink, SinkContext

__all__ = ["fault_plan", "message_sinks_with_faults", "with_faults"]

Post = Callable[[Scan], "Scan | None"]


def fault_plan(
    faults: tuple[Fault, ...], preset: SensorPreset, seed: int, sensor: str | None = None
) -> FaultPlan | None:
    """The plan of the faults that act on ``sensor`` (None: a single-sensor run); None when none do."""
    from rt_lidar.faults.plan import faults_for_sensor

    mine = faults_for_sensor(tuple(faults), sensor)
    return FaultPlan(mine, preset, seed) if mine else None


def _message_sink_kind(sink: ScanSink) -> str | None:
    """``zmq`` or ``ros2`` for a sink that sends a scan as one message, else None (the packet sinks
    take their faults through ``SinkContext.faults``)."""
    from rt_lidar.sinks.stream import ZmqStreamSink

    if isinstance(sink, ZmqStreamSink):
        return "zmq"
    if type(sink).__name__ == "Ros2Sink":  # not imported: it needs the ros2 extra
        return "ros2"
    return None


def message_sinks_with_faults(plan: FaultPlan | None, sinks: Sequence[ScanSink]) -> list[ScanSink]:
    """``sinks`` with each message sink (``zmq``, a rig's stream, ``ros2``) behind ``plan``'s network
    faults that apply to it; the packet sinks take theirs through ``SinkContext.faults``."""
    out: list[ScanSink] = []
    for sink in sinks:
        kind = _message_sink_kind(sink)
        if plan is not None and kind is not None and plan.network:
            net = NetworkFaults(plan.network, kind, plan.seed, plan)
            out.append(FaultyStream(sink, net) if net else sink)
        else:
            out.append(sink)
    return out


def with_faults(
    plan: FaultPlan,
    pipeline: Pipeline,
    sinks: Sequence[ScanSink],
    context: SinkContext,
    post: Callable[[Scan], Scan] | Post | None,
) -> tuple[list[ScanSink], SinkContext, Post]:
    """Install ``plan`` on a run: the power faults on ``pipeline``'s hits, the scan faults after
    ``post``, the stream sinks wrapped, the plan in the sinks' context; returns the new sinks,
    context and post."""
    pipeline.on_hits = plan.on_hits
    out = message_sinks_with_faults(plan, sinks)
    first = post

    def faulted(scan: Scan) -> Scan | None:
        got = first(scan) if first is not None else scan
        return None if got is None else plan.on_scan(got)

    return out, dataclasses.replace(context, faults=plan), faulted
