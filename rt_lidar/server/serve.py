"""``rt-lidar serve``: the embedded world behind an AirSim-compatible RPC server on loopback."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rt_lidar.bridge.airsim_settings import preset_from_airsim_settings
from rt_lidar.config import CASTERS, DEFAULT_CASTER, DEFAULT_PRESET, DEFAULT_SCENE, DEFAULT_SEED, RunConfig
from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.builder import build_world
from rt_lidar.schema import check_fields, spec
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.server.embedded_sim import MAX_RAYS_PER_CALL, EmbeddedSim
from rt_lidar.unreal_bridge import AirSimServer
from rt_lidar.unreal_bridge.world import CameraSpec

__all__ = ["EmbeddedServer", "ServeOptions", "start_embedded_server", "start_server_process"]


@dataclass(frozen=True)
class ServeOptions:
    """What ``rt-lidar serve`` runs; the world and the sensor (scene, preset, seed) come from a
    :class:`~rt_lidar.config.RunConfig` (:meth:`of_run`), so ``serve`` shares ``demo``'s defaults."""

    host: str = "127.0.0.1"
    port: int = spec(41451, 0, 65535)
    scene: str = DEFAULT_SCENE
    caster: str = spec(DEFAULT_CASTER, choices=CASTERS)
    """The world's ray caster (:data:`rt_lidar.config.CASTERS`)."""
    preset: str | None = DEFAULT_PRESET
    settings: str | None = None
    """An AirSim settings.json whose lidar block sets the sensor (overrides ``preset``)."""
    seed: int = spec(DEFAULT_SEED, 0, 2**63 - 1)
    paused: bool = False
    camera: str = "640x360"
    """Embedded camera size WxH (90 deg horizontal field of view)."""
    max_rays: int = spec(MAX_RAYS_PER_CALL, 1, 100_000_000)
    """Rays (firings x sub-rays) one lidar call may cast; an older backlog is cut."""
    rig: str | None = None
    """A rig file: every lidar of it on the vehicle, named as in the file (overrides ``preset``)."""
    cast_threads: int = spec(0, 0, 64)
    """Threads one lidar cast is split over (0: two for a large cast; 1: every cast on one thread, for a
    server that shares its cores with a client asking frames ahead, as the demo's: it casts two frames
    at once, docs/performance.md)."""

    device: str = spec("cpu", choices=("cpu", "cuda", "cuda-source-on-cpu"))
    """Where the world's rays are cast (docs/gpu.md): ``cpu`` (the world's caster), ``cuda`` (the scene's
    BVH on a GPU, the hits copied back for the wire) or ``cuda-source-on-cpu`` (that kernel on the CPU)."""

    flavor: str = spec("airsim", choices=("airsim", "cosys"))
    """Whose lidar answers: ``airsim`` (stock ``getLidarData``) or ``cosys`` (Cosys-AirSim's organised
    ``getLidarData`` with ``groundtruth`` names, and ``getGPULidarData``:
    :mod:`rt_lidar.server.cosys_flavor`)."""

    def __post_init__(self) -> None:
        check_fields(self, "serve")

    @classmethod
    def of_run(cls, run: RunConfig, **options: Any) -> ServeOptions:
        """The server of ``run``'s world: its scene, preset and seed; ``options`` sets the rest (host,
        port, camera, paused ...) and may override those."""
        return cls(
            **{"scene": run.scene, "caster": run.caster, "preset": run.preset, "seed": run.seed, **options}
        )


@dataclass
class EmbeddedServer:
    """A running server with its simulation."""

    server: AirSimServer
    sim: EmbeddedSim

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self.server.port)

    def close(self) -> None:
        """Stop serving and disconnect every client."""
        self.server.close()


def _preset(opts: ServeOptions) -> SensorPreset:
    if opts.settings:
        path = Path(opts.settings)
        try:
            settings = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read AirSim settings: {exc}") from exc
        return preset_from_airsim_settings(settings, source=str(path))
    if not opts.preset:
        raise ConfigError("serve: give --preset NAME or --settings FILE")
    return load_preset(opts.preset)


def _camera(spec: str) -> CameraSpec:
    w, sep, h = spec.lower().partition("x")
    if not sep or not w.isdigit() or not h.isdigit() or not (16 <= int(w) <= 4096 and 16 <= int(h) <= 4096):
        raise ConfigError(f"--camera '{spec}': expected WxH with 16..4096 pixels each, e.g. 640x360")
    return CameraSpec(width=int(w), height=int(h))


def start_server_process(opts: ServeOptions, timeout_s: float = 60.0) -> tuple[subprocess.Popen[str], int]:
    """``rt-lidar serve`` in its own process (its own core, its own GIL) on a free port of 127.0.0.1.

    Returns the process and its port. The process exits when the caller does (it watches its stdin).
    """
    cmd = [
        sys.executable,
        "-m",
        "rt_lidar.cli.main",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--scene",
        opts.scene,
        "--seed",
        str(opts.seed),
        "--camera",
        opts.camera,
        "--exit-with-stdin",
        "--max-rays",
        str(opts.max_rays),
    ]
    cmd += ["--settings", opts.settings] if opts.settings else ["--preset", str(opts.preset)]
    cmd += ["--rig", opts.rig] if opts.rig else []
    if opts.paused:
        cmd.append("--paused")
    if opts.cast_threads:
        cmd += ["--cast-threads", str(opts.cast_threads)]
    if opts.caster != DEFAULT_CASTER:
        cmd += ["--caster", opts.caster]
    if opts.flavor != "airsim":
        cmd += ["--flavor", opts.flavor]
    # stderr goes to a file, not a pipe nobody reads (a full pipe would block the server)
    err_log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115  (outlives this call: the server writes it)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err_log, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        found = re.search(r" on 127\.0\.0\.1:(\d+) ", line)
        if found:
            return proc, int(found.group(1))
    proc.kill()
    proc.wait()
    err_log.seek(0)
    err = err_log.read().strip()
    refused = re.fullmatch(r"rt-lidar serve: error: (.*)", err)  # a user error of ours: its one line
    if refused:
        raise ConfigError(refused.group(1))
    raise ConfigError(f"the embedded server did not start: {err[-2000:] or 'no output'}")


def start_embedded_server(opts: ServeOptions) -> EmbeddedServer:
    """Build the world and start serving it in a background thread."""
    # bad input refused before the world is built
    camera = _camera(opts.camera)
    preset = None if opts.rig else _preset(opts)
    world = build_world(opts.scene, seed=opts.seed, caster=opts.caster)
    if opts.device != "cpu":  # --device: cast by the BVH kernel (a ConfigError where it cannot run)
        from rt_lidar.pipeline.device_world import world_on_device

        world = world_on_device(world, opts.device)
    cast_threads = opts.cast_threads or None  # 0: the world's two-thread split
    if opts.rig:  # a sensor rig (rt_lidar.rig): every lidar, named as in the rig file
        from rt_lidar.rig import load_rig

        rig = load_rig(opts.rig)
        first, *more = rig.sensors
        sim = EmbeddedSim(
            world,
            first.preset,
            lidar_name=first.name,
            mount=first.mount,
            paused=opts.paused,
            camera=camera,
            max_rays_per_call=opts.max_rays,
            more_lidars=[(s.name, s.preset, s.mount) for s in more],
            cast_threads=cast_threads,
        )
    else:
        assert preset is not None
        sim = EmbeddedSim(
            world,
            preset,
            paused=opts.paused,
            camera=camera,
            max_rays_per_call=opts.max_rays,
            cast_threads=cast_threads,
        )
    # heavy casts at once hold at most one call's ray budget, as one full-budget call did alone
    try:
        server = AirSimServer(sim, host=opts.host, port=opts.port, cast_budget_rays=opts.max_rays)
    except OSError as exc:  # the port taken, an address not of this machine
        raise ConfigError(
            f"cannot listen on {opts.host}:{opts.port}: {exc.strerror or exc}; "
            "another server there? (--port 0 takes a free port)"
        ) from None
    if opts.flavor == "cosys":
        from rt_lidar.server.cosys_flavor import serve_cosys

        serve_cosys(server, sim)
    server.start()
    return EmbeddedServer(server, sim)
