"""The controller: pull each frame's hits from an AirSim-compatible server and run the pipeline on them.

``rt-lidar run --airsim HOST:PORT`` drives a real AirSim / Cosys-AirSim in Unreal or our embedded
server (``rt-lidar serve``) through the same calls. With the extension ``rtLidarGetHits`` (our server)
every ray arrives with ring, firing time, incidence, material and glass; against stock AirSim the
controller recovers them from ``getLidarData`` (:mod:`rt_lidar.bridge.recover`). A beam of several sub-rays
(``--sub-rays N``) is asked for with ``rtLidarGetBeamHits``: the server casts every firing as the
bundle and the physics sums its echoes as in-process; a server without that call gets one ray a pulse.
Sunlight (``--sun-lux``) goes the same way: the call names the sun (the scenario's direction, or the
server's scene sun) and the server adds every ray's sun cosines, so the ambient light acts as
in-process; against a server without it sunlight is not applied (a warning says so).

Lockstep (``--lockstep``): the sim is paused and advanced by ``simContinueForTime`` one sim frame at a
time, and each answer's firings are checked against the local schedule, so a skipped or repeated
sector is detected and counted. With ``--realtime`` each advance waits for the wall clock
(:mod:`rt_lidar.bridge.pacing`): the sim never runs ahead of real time. Free run: the controller
follows the sim's clock and takes whatever the sim swept since the previous read.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from rt_lidar.bridge.cosys import CosysFrame, CosysGrid, grid_error_deg, read_cosys_cpu, read_cosys_gpu
from rt_lidar.bridge.cosys_hits import CellLabels, cell_labels, hits_from_cosys
from rt_lidar.bridge.full_beam_wire import full_beam_from_wire, is_full_beam_answer
from rt_lidar.bridge.hits import hits_from_wire
from rt_lidar.bridge.material_rules import MaterialAssignment, MaterialRules, assign_segmentation, match_scene
from rt_lidar.bridge.pacing import RealtimePacer
from rt_lidar.bridge.recover import recover_hits
from rt_lidar.config import SunConfig
from rt_lidar.errors import ConfigError, RtLidarError
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.beam_full import BundleCounts, FullBeamPlan
from rt_lidar.pipeline.builder import negotiate
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.pipeline.sources import BeamGrant, Capabilities, Hits, Pose
from rt_lidar.sensor.beam import BeamConfig, SubRayPattern
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import Firings, beam_origins, firings_between, schedule_digest
from rt_lidar.unreal_bridge import AirSimClient, LidarHits, RpcError
from rt_lidar.unreal_bridge.beam_call import FullBeamRequest, SunArg, encode_beam
from rt_lidar.unreal_bridge.client import FrameRequest
from rt_lidar.unreal_bridge.errors import BridgeError
from rt_lidar.unreal_bridge.wire import FIRING_FIELDS, OMITTABLE_FIELDS, FluPose

__all__ = ["FLAVORS", "BridgeSource", "BridgeStats", "airsim_mount", "bridge_pipeline", "parse_address"]

FLAVORS = ("auto", "airsim", "cosys", "cosys-gpu")
"""How a server without the extension is read: ``auto`` (Cosys-AirSim when its ``getLidarData`` carries
``groundtruth``, else stock AirSim), ``airsim`` (stock ``getLidarData``), ``cosys`` (Cosys-AirSim's CPU
lidar), ``cosys-gpu`` (its ``getGPULidarData``): docs/simulators.md."""


def parse_address(addr: str, default_port: int = 41451) -> tuple[str, int]:
    """``"HOST:PORT"`` (or ``"HOST"``) -> ``(host, port)``."""
    host, sep, port = addr.rpartition(":")
    if not sep:
        return addr, default_port
    try:
        p = int(port)
    except ValueError:
        raise RtLidarError(f"--airsim '{addr}': port '{port}' is not a number") from None
    if not 0 < p < 65536:
        raise RtLidarError(f"--airsim '{addr}': port must be in 1..65535")
    return host or "127.0.0.1", p


def _pose(pose: FluPose) -> Pose:
    """An answer's sensor pose (``position``, ``orientation`` w x y z) as float64 arrays."""
    return np.asarray(pose.position, float), np.asarray(pose.orientation, float)


@dataclass
class BridgeStats:
    """What the controller saw of the server."""

    frames: int = 0
    sector_mismatches: int = 0
    default_material: str | None = None
    """Stock path without a material map: the material every surface was taken as."""
    """Lockstep answers whose firings differ from the local schedule (skipped or repeated rays)."""
    extension: bool = False
    sub_rays: int = 1
    """Rays the server casts per pulse (> 1 once :meth:`BridgeSource.use_beam` was granted)."""
    sun: bool = False
    """The server reports every ray's sun cosines (a sun granted by :meth:`BridgeSource.use_beam`)."""
    sun_direction: tuple[float, float, float] | None = None
    """The world direction towards the sun the server casts with (its ``info.sun_direction``)."""
    server_skipped_ns: int = 0
    last_weather: dict[str, float] | None = None
    fetch_s: float = 0.0
    transport: str = "tcp"
    """How the last extension answer's per-ray fields came: ``"tcp"`` or ``"shm"`` (shared memory)."""
    shm_refused: str | None = None
    """Why they do not come through shared memory (None while they do or may)."""
    mismatch_detail: list[str] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)
    """The fields the answers were asked to leave out (``rtLidarGetHits``' ``omit``): the points and
    normals from our server, and the rings, times and directions when its schedule is this side's."""
    compact: bool = False
    """The answers were asked to be compact (``rt_lidar.unreal_bridge.compact``: narrow integers, the glass
    fields only where rays crossed glass)."""
    flavor: str = "rt-lidar"
    """How the hits were read: ``rt-lidar`` (the extension), ``airsim``, ``cosys`` or ``cosys-gpu``."""
    materials: dict[str, Any] | None = None
    """What the name rules did at connect (:meth:`MaterialAssignment.as_dict`), None when not used."""
    grid_error_deg: float | None = None
    """Cosys-AirSim: the largest angle between a firing and the grid cell that served it."""

    def as_dict(self, server: str) -> dict[str, object]:
        """The figures for a run's summary.json."""
        return {
            "server": server,
            "extension": self.extension,
            "sub_rays": self.sub_rays,
            "sun": self.sun,
            "sun_direction": self.sun_direction,
            "frames": self.frames,
            "sector_mismatches": self.sector_mismatches,
            "default_material": self.default_material,
            "mismatch_detail": self.mismatch_detail,
            "fetch_time_s": self.fetch_s,
            "transport": self.transport,
            "shm_refused": self.shm_refused,
            "omitted": self.omitted,
            "compact": self.compact,
            "flavor": self.flavor,
            "materials": self.materials,
            "grid_error_deg": self.grid_error_deg,
        }


class BridgeSource:
    """A :class:`~rt_lidar.pipeline.sources.HitSource` pulling each sim frame's hits over the bridge."""

    def __init__(
        self,
        client: AirSimClient,
        preset: SensorPreset,
        *,
        lockstep: bool = True,
        sim_hz: float = 20.0,
        lidar_name: str = "",
        vehicle_name: str = "",
        material_map: Mapping[int, str] | None = None,
        use_extension: bool | None = None,
        advance_clock: bool = True,
        poses: bool = False,
        material_rules: MaterialRules | None = None,
        flavor: str = "auto",
    ) -> None:
        self.client = client
        self.poses = poses
        """Ask every answer for the sensor's world poses on the 1 ms grid (``info.pose_samples``, into
        :attr:`Hits.pose_samples`): a rig's interference model needs each pulse's world pose."""
        self.advance_clock = advance_clock
        """Lockstep: this source advances the sim each frame (a rig's other lidars read the same frame)."""
        self.preset = preset
        self.lockstep = lockstep
        self.sim_hz = sim_hz
        self.lidar_name = lidar_name
        self.vehicle_name = vehicle_name
        self.stats = BridgeStats()
        self._origin_ns: int | None = None
        self._last_ns: int | None = None
        self._last_wall = time.perf_counter()
        self._pose: Pose = (np.zeros(3), np.array([1.0, 0, 0, 0]))
        """The pose of the latest answer: where the next answer's slice starts (only the thread that
        fetches touches it)."""
        self._material_names: list[str] = []
        self._beam: SubRayPattern | None = None
        self._sun: SunArg = None
        self._full: FullBeamPlan | None = None
        """The ``--beam full`` plan the server casts (each answer's counts in its hits' ``bundle_counts``),
        or None."""
        self._full_request: FullBeamRequest | None = None
        self.retro_gain: np.ndarray | None = None
        """The materials' retro gains for ``--beam full`` (None: the packaged table's; the server judges
        the retro-reflectors of its own world)."""
        self.volume: np.ndarray | None = None
        """The materials' ``volume`` flags for ``--beam full`` (as ``retro_gain``; the server judges its
        own world's)."""
        self._beam_call: bool | None = None
        """Whether the server offers ``rtLidarGetBeamHits`` (None: not asked yet)."""
        self.ask_ahead: Callable[[int, int], tuple[int, int] | None] | None = None
        """Lockstep: given the frame being fetched, the one that will be asked for next (None: none
        known). Set by :func:`bridge_pipeline`; with it the request for the next frame goes out as soon
        as this frame's answer is in, so the server casts it while this side decodes and runs the
        physics (see :meth:`hits`)."""
        self.ask_depth = 1
        """Frames asked ahead (with :attr:`ask_ahead`): each adds a frame (1/f_sim) between a driver's
        controls and the frame that first sees them; with two, our server casts two frames at once
        (:mod:`rt_lidar.unreal_bridge.later`) while this side works on a third."""
        self._ahead: deque[tuple[int, int, FrameRequest]] = deque()
        """(t0, t1, request) of the frames asked ahead, in order, their answers not read yet."""
        self.pacer: RealtimePacer | None = None
        """Lockstep with ``--realtime``: holds each advance of the sim until the wall clock has reached
        it (:mod:`rt_lidar.bridge.pacing`); None: as fast as the run goes."""
        self._in_order = False
        """The server answers a connection's calls one at a time, in order (``rtLidarServerInfo``):
        needed to ask ahead (an rpclib server on several threads may run a frame's two calls at once)."""
        if not lockstep:
            client.sim_pause(False)  # free run follows a running sim (a previous lockstep run left it paused)
        if flavor not in FLAVORS:
            raise RtLidarError(f"flavor {flavor!r}: choose one of {', '.join(FLAVORS)}")
        self.material_rules = material_rules
        self.material_assignment: MaterialAssignment | None = None
        """What the name rules did at connect (None: the map given, or the extension's materials)."""
        self._cosys: tuple[int, CosysFrame, CellLabels] | None = None
        self._cosys_grid = CosysGrid.of_preset(preset)
        self._segment_of_label: dict[str, int] = {}
        self.stats.extension = self._probe_extension() if use_extension is None else use_extension
        if not self.stats.extension:
            if lockstep:
                self.client.sim_pause(True)
            self.stats.flavor = self._detect_flavor(flavor)
        if not self._material_names:
            self._material_names = load_material_table().names
        names = self._material_names
        default = names.index("concrete") if "concrete" in names else 0
        self._default_material = default
        unknown = sorted({v for v in (material_map or {}).values() if v not in names})
        if unknown:
            raise ConfigError(
                f"material map names unknown materials: {', '.join(unknown)} (valid: {', '.join(names)})"
            )
        # Cosys's CPU lidar names the hit actors: the rules read those names, no ids are set. The ids
        # are set before the first read, so every answer read is of the ids set.
        by_ids = not self.stats.extension and self.stats.flavor != "cosys"
        if by_ids and material_map is None and material_rules is not None:
            self.material_assignment = assign_segmentation(
                client, material_rules, names, self._segmentation_names()
            )
            material_map = self.material_assignment.segment_material
            self.stats.materials = self.material_assignment.as_dict()
        elif self.stats.flavor == "cosys" and material_rules is not None and not self.stats.extension:
            # the labels are the actors' names: what the rules make of the scene's, said once
            self.material_assignment = match_scene(client, material_rules)
            self.stats.materials = self.material_assignment.as_dict()
        if by_ids and not material_map:
            print(
                f"rt-lidar: stock getLidarData gives no materials, and neither a --material-map nor name "
                f"rules were given: every surface is taken as {names[default]} (docs/airsim.md)",
                file=sys.stderr,
            )
            self.stats.default_material = names[default]
        self._segment_material_names = dict(material_map or {})
        self._segment_material = {
            int(k): names.index(v) for k, v in (material_map or {}).items() if v in names
        }
        if self.stats.extension:
            return
        if self.stats.flavor == "airsim":
            first = self.client.get_lidar_data(lidar_name, vehicle_name)  # starts the time origin
            self._origin_ns = self._last_ns = int(first.time_stamp)
            self._pose = _pose(first.pose)
        else:
            frame = self._read_cosys()
            self._origin_ns = self._last_ns = int(frame.time_stamp)
            self._pose = _pose(frame.pose)

    def _segmentation_names(self) -> list[str] | None:
        """The names Cosys-AirSim's segmentation knows its meshes by (its GPU lidar's colours are theirs);
        None: the scene's objects (stock AirSim names meshes by their actors)."""
        if self.stats.flavor != "cosys-gpu":
            return None
        try:
            return [str(n) for n in self.client.rpc.call("simListInstanceSegmentationObjects")]
        except RpcError:
            return None

    def _detect_flavor(self, flavor: str) -> str:
        """The flavor of a server without the extension: as asked, or (``auto``) Cosys-AirSim when its
        ``getLidarData`` answer carries ``groundtruth``, else stock AirSim."""
        if flavor != "auto":
            return flavor
        raw = self.client.rpc.call("getLidarData", self.lidar_name, self.vehicle_name)
        return "cosys" if isinstance(raw, Mapping) and "groundtruth" in raw else "airsim"

    def _read_cosys(self) -> CosysFrame:
        read = read_cosys_gpu if self.stats.flavor == "cosys-gpu" else read_cosys_cpu
        try:
            return read(self.client, self.lidar_name, self.vehicle_name)
        except ValueError as exc:
            raise RtLidarError(f"the server's {self.stats.flavor} lidar answer: {exc}") from exc

    def _probe_extension(self) -> bool:
        """Ask for the extension once; also starts the time origin (an empty or tiny first sweep)."""
        if self.lockstep:
            self.client.sim_pause(True)
        try:
            answer = self.client.rt_lidar_get_hits(self.lidar_name, self.vehicle_name)
        except RpcError:
            return False
        self._material_names = list(answer.info.get("materials", []))
        self._origin_ns = int(answer.info.get("t1_ns", answer.time_stamp))
        self._pose = _pose(answer.pose)
        self._last_ns = self._origin_ns
        if "direction" not in answer.extras and "direction" not in answer.omitted:
            return False
        info = self.client.rt_lidar_server_info()
        self._in_order = info.get("in_order") is True
        self.client.compact = self.stats.compact = info.get("compact") is True
        offered = info.get("omit")
        if isinstance(offered, list):  # points and normals: the hits are made from the optional fields
            names = {f for f in offered if isinstance(f, str)}
            self.client.omit_fields = OMITTABLE_FIELDS & names
            if names >= FIRING_FIELDS and self._same_schedule(info.get("firings")):
                # this side's firings stand for the server's rings, times and directions
                self.client.omit_firings = self.client.omit_firings | {self.lidar_name}
            self.stats.omitted = sorted(self.client.omit_for(self.lidar_name))
        return True

    def _same_schedule(self, digests: object) -> bool:
        """Whether the server's lidar fires on this side's schedule (its ``firings`` digest is ours), and
        this side has each frame's firings to stand for the rays' rings, times and directions: in
        lockstep, without a rig's pose samples."""
        if not (self.lockstep and not self.poses and isinstance(digests, Mapping)):
            return False
        mine = schedule_digest(self.preset)
        return mine is not None and digests.get(self.lidar_name) == mine

    @property
    def capabilities(self) -> Capabilities:
        """What this server gives: with the extension (our server) the rays' ring, time and normal, the
        sim's weather, and sub-ray bundles and sun cosines when it offers ``rtLidarGetBeamHits`` (known
        once :meth:`use_beam` asked; until then stated as offered)."""
        ext = self.stats.extension
        return Capabilities(
            sub_rays=ext and self._beam_call is not False,
            sun=ext and self._beam_call is not False,
            weather=ext,
            extension=ext,
            full_beam=ext and self._beam_call is not False,
        )

    @property
    def full_beam(self) -> FullBeamPlan | None:
        """The ``--beam full`` plan the server casts (granted by :meth:`use_full_beam`), or None."""
        return self._full

    def use_full_beam(self, plan: FullBeamPlan, sun: SunArg = None) -> BeamGrant:
        """Ask the server for ``--beam full`` with ``plan``'s bundle and thresholds: it casts every
        firing's central ray and chooses the pulses that get the bundle (the world is on its side). A
        server of ours that predates it answers with every pulse's bundle: then granted without
        ``full`` (the dense bundle); one without the call, one ray a pulse (see :meth:`use_beam`)."""
        return self.use_beam(plan.pattern, sun, full=plan)

    def use_beam(
        self, pattern: SubRayPattern, sun: SunArg = None, full: FullBeamPlan | None = None
    ) -> BeamGrant:
        """Ask the server to cast every firing as ``pattern``'s sub-ray bundle (``rtLidarGetBeamHits``)
        from the next frame on, with every ray's sun cosines when ``sun`` names the sun (a world-frame
        unit vector towards it, or ``"scene"`` for the server's scene sun); call it before the first
        frame. Grants one ray a pulse when the server does not offer the call (stock AirSim, an older
        server); grants no sun when it lacks the call or predates the sun entry (answers without the
        cosines). What was granted is also in :attr:`stats`.

        The first call is the probe: in lockstep it sweeps nothing (the sim is paused); in free run it
        restarts the time origin after the rays it swept.
        """
        self._beam, self._sun, self.stats.sub_rays, self.stats.sun = None, None, 1, False
        self._full = self._full_request = None
        self.stats.sun_direction = None
        if len(pattern) == 1 and sun is None:
            return BeamGrant(1, False)
        if not self.stats.extension:
            return BeamGrant(1, False)
        request = None if full is None else FullBeamRequest(full.edge_m, full.spread_m)
        try:  # always with the sub-ray entry: a server older than the sun entry needs it (and ignores sun)
            answer = self.client.rt_lidar_get_beam_hits(
                self.lidar_name, self.vehicle_name, pattern.offsets_rad, pattern.weights, sun, full=request
            )
        except RpcError as exc:
            if exc.unbound:
                self._beam_call = False
                return BeamGrant(1, False)
            what = f"{len(pattern)} sub-rays a pulse" + (" with a sun" if sun is not None else "")
            raise RtLidarError(f"the server refused {what}: {exc.error}") from exc
        self._beam_call = True
        self._origin_ns = self._last_ns = int(answer.info.get("t1_ns", answer.time_stamp))
        self._pose = _pose(answer.pose)
        granted = sun is not None and "sun_cos" in answer.extras and "beam_sun_cos" in answer.extras
        if granted or len(pattern) > 1:  # else nothing rtLidarGetHits does not give: stay with it
            self._beam, self.stats.sub_rays = pattern, len(pattern)
        if granted:
            self._sun, self.stats.sun = sun, True
            if "sun_direction" in answer.info:
                x, y, z = answer.info["sun_direction"]
                self.stats.sun_direction = (float(x), float(y), float(z))
        if full is not None and is_full_beam_answer(answer):
            self._full, self._full_request = full, request
        return BeamGrant(self.stats.sub_rays, self.stats.sun, self._full is not None)

    def use_wet_road(self, wetness: float) -> bool:
        """A wet road of ``wetness`` (0..1) asked for by the scenario (``--road-wetness``): set as the sim's
        ``Roadwetness`` (``simSetWeatherParameter`` 1, weather enabled), which makes our server mark the
        road and cast its mirror rays and spray (and Unreal draw the road wet). True when the server
        gives the fields the physics needs (our extension); stock AirSim gets the call but no fields."""
        if wetness <= 0:
            return True
        self.client.sim_enable_weather(True)
        self.client.sim_set_weather_parameter(1, float(wetness))
        return self.stats.extension

    @property
    def start_ns(self) -> int:
        """Sim time at which the controller took over: frame 0 of its pipeline starts here."""
        return int(self._origin_ns or 0)

    @property
    def material_names(self) -> list[str]:
        """Material names the hits' material numbers index (the server's, or the packaged table's)."""
        return self._material_names

    def _can_ask_ahead(self) -> bool:
        """Whether frames go out ahead on their own: lockstep frames this source advances, with our
        extension's calls, over TCP or through shared memory (a segment of the client's ring a frame)."""
        return self.ask_ahead is not None and self.advance_clock and self.can_be_asked_ahead()

    def can_be_asked_ahead(self) -> bool:
        """Whether this source's lockstep frames may be asked for ahead (by itself, or by a rig through
        :meth:`ask_frame`): our extension's calls (sub-ray bundles, sun and pose samples included) on a
        server that answers in order."""
        return self._in_order and self.lockstep and self.stats.extension

    def _beam_form(self) -> dict[str, Any] | None:
        """The ``rtLidarGetBeamHits`` entries this source's frames ask for (sub-rays, sun, pose
        samples), as :meth:`_fetch_extension`'s calls send them; None: the plain ``rtLidarGetHits``."""
        b = self._beam
        if b is None and not self.poses:
            return None
        if b is None:
            return encode_beam(None, None, None, True)
        return encode_beam(b.offsets_rad, b.weights, self._sun, self.poses, self._full_request)

    def ask_frame(self, t0_ns: int, t1_ns: int) -> None:
        """Send the request of the lockstep frame ``[t0_ns, t1_ns)`` now (advancing the sim first when
        this source advances it); :meth:`hits` of that frame reads its answer. A rig asks every lidar's
        frames in frame order this way, so the server casts them while this side works on earlier ones."""
        self._ahead.append((t0_ns, t1_ns, self._send_frame(t0_ns, t1_ns)))

    def _send_frame(self, t0_ns: int, t1_ns: int) -> FrameRequest:
        """The requests of the lockstep frame ``[t0_ns, t1_ns)``, sent without waiting."""
        seconds = (t1_ns - t0_ns) * 1e-9 if self.advance_clock else None
        if seconds is not None and self.pacer is not None:
            self.pacer.hold(t0_ns, t1_ns)
        return self.client.send_frame_request(seconds, self.lidar_name, self.vehicle_name, self._beam_form())

    def _drop_asked_ahead(self, until: tuple[int, int] | None = None) -> None:
        """Read and drop the answers of the frames asked ahead that are not wanted any more (the sim
        has moved past them: the lockstep check of the next frame says so): every one, or those before
        the frame ``until`` when it is among them."""
        while self._ahead and self._ahead[0][:2] != until:
            request = self._ahead.popleft()[2]
            with contextlib.suppress(BridgeError, OSError):  # a lost link loses it anyway
                self.client.read_frame(request)

    def close(self) -> None:
        """Read and drop the frames asked ahead (the pipeline's ``close`` calls this): the server has
        finished with it before the connection goes, so a later client of the same server (a
        reconnect, the next run) never races with it, and no answer is left waiting on this client."""
        self._drop_asked_ahead()

    def _fetch_asked_ahead(self, t0_ns: int, t1_ns: int, expected: Firings) -> tuple[Hits, int, int]:
        """Frame ``[t0_ns, t1_ns)`` as :meth:`_fetch_extension` gets it, with the requests of the next
        frames (up to :attr:`ask_depth`) sent before this one's answer is decoded: the server's casts of
        frames k+1.. overlap this side's decode and physics of frame k. The requests and answers are
        exactly those of one frame at a time, in the same order, so the scans are the same. With shared
        memory each frame in flight has a segment of its own (``AirSimClient.send_frame_request``)."""
        ahead = self._ahead
        self._drop_asked_ahead(until=(t0_ns, t1_ns))
        request = ahead.popleft()[2] if ahead else self._send_frame(t0_ns, t1_ns)
        ask = self.ask_ahead if self._can_ask_ahead() else None

        def ask_next() -> None:
            last = ahead[-1][:2] if ahead else (t0_ns, t1_ns)
            while ask is not None and len(ahead) < self.ask_depth:
                nxt = ask(*last)
                if nxt is None or (self.pacer is not None and not self.pacer.is_due(nxt[1])):
                    return  # paced: a frame not due yet is asked for when it is, not held here
                ahead.append((nxt[0], nxt[1], self._send_frame(*nxt)))
                last = nxt

        answer = self._checked(lambda: self.client.read_frame(request, before_decode=ask_next))
        return self._hits_of_answer(answer, expected, (t0_ns, t1_ns))

    def _fetch_extension(
        self, expected: Firings | None = None, interval: tuple[int, int] | None = None
    ) -> tuple[Hits, int, int]:
        b = self._beam
        if b is None:
            ans = self._checked(
                lambda: self.client.rt_lidar_get_hits(self.lidar_name, self.vehicle_name, poses=self.poses)
            )
        else:
            ans = self._checked(
                lambda: self.client.rt_lidar_get_beam_hits(
                    self.lidar_name,
                    self.vehicle_name,
                    b.offsets_rad,
                    b.weights,
                    self._sun,
                    poses=self.poses,
                    full=self._full_request,
                )
            )
        return self._hits_of_answer(ans, expected, interval)

    def _checked(self, call: Callable[[], LidarHits]) -> LidarHits:
        """``call()``'s answer; with pose samples asked for, a server that refuses them or answers
        without them is told apart by name."""
        try:
            ans = call()
        except RpcError as exc:
            if not self.poses:
                raise
            raise RtLidarError(
                f"lidar '{self.lidar_name}': the server does not send the sensor's poses (rtLidarGetBeamHits "
                f"with a 'poses' entry, which a rig's --crosstalk needs; rt-lidar serve of this version "
                f"does): {exc.error}"
            ) from exc
        if self.poses and "pose_samples" not in ans.info and len(ans.ring):
            raise RtLidarError(
                f"lidar '{self.lidar_name}': the server answered without info.pose_samples (a rig's "
                "--crosstalk needs each pulse's world pose)"
            )
        return ans

    def _hits_of_answer(
        self, ans: LidarHits, expected: Firings | None = None, interval: tuple[int, int] | None = None
    ) -> tuple[Hits, int, int]:
        """The hits of an extension answer, with the interval it covers (``expected``: this side's
        firings of the frame ``interval``, taken when the answer's are exactly those; an answer without
        its firings takes them, or this side's firings of the interval it swept when that differs)."""
        t0 = int(ans.info.get("t0_ns", self._last_ns or 0))
        t1 = int(ans.info.get("t1_ns", ans.time_stamp))
        if self._origin_ns is None:
            self._origin_ns = t0
        weather = ans.info.get("weather")
        self.stats.last_weather = weather
        self.stats.transport, self.stats.shm_refused = self.client.transport, self.client.shm_refused
        if ans.omitted & FIRING_FIELDS and (expected is None or (t0, t1) != interval):
            expected = firings_between(self.preset, t0, t1)  # what the server swept, on the same schedule
        if is_full_beam_answer(ans):
            hits, reasons = full_beam_from_wire(ans, expected=expected)
            if self._full is not None:  # counted when the frame loop hands the frame on
                bundled = 0 if hits.bundle is None else len(hits.bundle.pulses)
                hits.bundle_counts = BundleCounts(hits.pulses, bundled, reasons)
        else:
            hits = hits_from_wire(ans, expected=expected)
        if hits.firings.origin is None and self.preset.beam_origins_m is not None:
            hits.firings = self._with_origins(hits.firings, t0, t1)
        hits.weather = weather
        hits.pose_end = _pose(ans.pose)
        return hits, t0, t1

    def _with_origins(self, f: Firings, t0: int, t1: int) -> Firings:
        """Firings rebuilt from an answer's rays, with their beam origins: this side's schedule's where
        the rays are its firings (the same values as in-process), else turned to each ray's azimuth."""
        local = firings_between(self.preset, t0, t1)
        if np.array_equal(local.t_ns, f.t_ns) and np.array_equal(local.ring, f.ring):
            return replace(f, origin=local.origin)
        return replace(f, origin=beam_origins(self.preset, f.ring, f.azimuth_deg))

    def _fetch_stock(self, local: Firings | None) -> tuple[Hits, int, int]:
        frame = self.client.get_lidar_data(self.lidar_name, self.vehicle_name)
        t1 = int(frame.time_stamp)
        if self._origin_ns is None:
            self._origin_ns = t1
        t0 = self._last_ns if self._last_ns is not None else t1
        pose_end = _pose(frame.pose)
        if local is None:
            local = firings_between(self.preset, t0, t1)
        hits = recover_hits(
            frame.points,
            frame.segmentation,
            local,
            self.preset,
            self._segment_material,
            self._default_material,
        )
        hits.pose_end = pose_end
        return hits, t0, t1

    def _fetch_cosys(self, local: Firings | None) -> tuple[Hits, int, int]:
        """A frame served from the latest Cosys-AirSim rotation (read once a rotation: its time stamp
        moves only when a rotation ends). Lockstep: the frame's own firings; free run: the firings of
        one sim frame after the previous one (the answer's stamp cannot say how far the sim went)."""
        frame = self._read_cosys()
        if self._cosys is None or self._cosys[0] != frame.time_stamp:
            labels = cell_labels(
                frame,
                self._material_names,
                self.material_rules or _NO_RULES,
                self._segment_material_names,
                self._segment_of_label,
            )
            self._cosys = (frame.time_stamp, frame, labels)
        _, frame, labels = self._cosys
        t0 = self._last_ns if self._last_ns is not None else int(frame.time_stamp)
        t1 = t0 + round(1e9 / self.sim_hz)
        if local is None:
            local = firings_between(self.preset, t0, t1)
        hits = hits_from_cosys(frame, labels, local, self.preset, self._cosys_grid)
        err = grid_error_deg(self._cosys_grid, local.azimuth_deg, local.elevation_deg, frame.labels is None)
        self.stats.grid_error_deg = max(self.stats.grid_error_deg or 0.0, err)
        hits.pose_end = _pose(frame.pose)
        return hits, t0, t1

    def hits(self, firings: Firings, t0_ns: int, t1_ns: int) -> Hits:
        """The hits of sim frame ``[t0_ns, t1_ns)``: lockstep advances the sim by exactly that frame and
        checks the answer against ``firings``; free run waits one frame of wall time and takes what the
        sim swept. (The pipeline's ``prefetch`` overlaps this call with the previous frame's physics.)
        """
        t_wall = time.perf_counter()
        pose_start = self._pose
        if self._ahead or self._can_ask_ahead():
            hits, s0, s1 = self._fetch_asked_ahead(t0_ns, t1_ns, firings)
        else:
            if self.lockstep and self.advance_clock:
                if self.pacer is not None:
                    self.pacer.hold(t0_ns, t1_ns)
                self.client.sim_continue_for_time((t1_ns - t0_ns) * 1e-9)
            else:
                wait = 1.0 / self.sim_hz - (t_wall - self._last_wall)
                if wait > 0:
                    time.sleep(wait)
                self._last_wall = time.perf_counter()
            if self.stats.extension:
                local = firings if self.lockstep else None
                hits, s0, s1 = self._fetch_extension(local, (t0_ns, t1_ns))
            elif self.stats.flavor in ("cosys", "cosys-gpu"):
                hits, s0, s1 = self._fetch_cosys(firings if self.lockstep else None)
                if self.lockstep:  # the frame's own firings, served from the latest rotation
                    s0, s1 = t0_ns, t1_ns
            else:
                hits, s0, s1 = self._fetch_stock(firings if self.lockstep else None)
        hits.pose_start = pose_start
        self._pose = hits.pose_end = hits.pose_end or pose_start
        if hits.bundle is not None:  # --beam full: the bundles' hits lie in the same slice
            hits.bundle.hits.pose_start, hits.bundle.hits.pose_end = hits.pose_start, hits.pose_end
        self._last_ns = s1
        self.stats.frames += 1
        self.stats.fetch_s += time.perf_counter() - t_wall
        if self.lockstep:
            self._check_sector(firings, hits, t0_ns, t1_ns, s0, s1)
            return hits
        hits.interval = (s0, s1)
        return hits

    def _check_sector(self, local: Firings, got: Hits, t0: int, t1: int, s0: int, s1: int) -> None:
        same = (s0, s1) == (t0, t1) and len(local) == len(got.firings)
        if same and self.stats.extension:
            same = bool(
                np.array_equal(local.t_ns, got.firings.t_ns) and np.array_equal(local.ring, got.firings.ring)
            )
        if not same:
            self.stats.sector_mismatches += 1
            if len(self.stats.mismatch_detail) < 5:
                self.stats.mismatch_detail.append(
                    f"frame [{t0}, {t1}) ns: server swept [{s0}, {s1}) with {len(got.firings)} rays, "
                    f"expected {len(local)}"
                )


_NO_RULES = MaterialRules(())


def bridge_pipeline(
    source: BridgeSource,
    sim_hz: float,
    seed: int = 0,
    weather: WeatherConfig | None = None,
    beam: BeamConfig | None = None,
    sun: SunConfig | None = None,
    ask_depth: int = 1,
) -> Pipeline:
    """The pipeline over ``source``, starting at the sim time the controller took over, with prefetch.

    With no ``weather`` given the physics follows the server's (``simSetWeatherParameter``, carried in
    every answer). A beam of several sub-rays (``beam`` or the preset's) is cast by the server as
    bundles when it offers ``rtLidarGetBeamHits``; otherwise as its central ray, with a warning.
    Sunlight (``sun``) is cast the same way, for the direction the in-process pipeline takes (the
    scenario's, else the scene's: then the server's own); a server without the sun entry gets no
    sunlight, with a warning. ``pipeline.physics.config`` is what was granted (what runs).
    """
    config = PhysicsConfig(
        weather=weather,
        beam=beam,
        sun_illuminance_lux=sun.lux if sun is not None else 0.0,
        sun_direction=sun.direction if sun is not None else None,
    )
    resolved = negotiate(source, source.preset, config)
    physics = SensorPhysics.from_preset(source.preset, source.material_names, config=resolved)
    pipeline = Pipeline(
        source.preset, source, physics, sim_hz=sim_hz, seed=seed, start_ns=source.start_ns, prefetch=True
    )
    source.ask_ahead = pipeline.next_interval  # the frames it asks for, in order
    source.ask_depth = max(1, int(ask_depth))
    return pipeline


def airsim_mount(client: AirSimClient, lidar_name: str = "", vehicle_name: str = "") -> tuple[float, ...]:
    """The lidar's mount on its vehicle, ``(x, y, z, qw, qx, qy, qz)`` (vehicle -> sensor, x forward, y
    left, z up), from the two poses the server reports: ``getLidarData``'s and ``simGetVehiclePose``'s."""
    from rt_lidar.unreal_bridge.world import Pose

    lidar = client.get_lidar_data(lidar_name, vehicle_name).pose
    vehicle = client.sim_get_vehicle_pose(vehicle_name)
    mount = (
        Pose(np.asarray(vehicle.position), np.asarray(vehicle.orientation))
        .inverse()
        .compose(Pose(np.asarray(lidar.position), np.asarray(lidar.orientation)))
    )
    return (*(float(v) for v in mount.position), *(float(v) for v in mount.rotation))
