"""Hostile clients of an AirSim RPC server, for hardening checks (issue 18): each one attack, bounded.

Every attack takes ``(host, port, rng)``, does what a hostile or broken client would (a NaN steering,
a catastrophic regex, a 100 MiB request, 1000-deep nesting, 300 held sockets, dripping requests,
random garbage, ...), gives up within a few seconds, and returns one line saying what the server did.
:func:`probe` is the normal client that must be answered afterwards; :func:`rss_bytes` reads a
process's resident memory. The fuzz test (``tests/unreal_bridge/test_fuzz_server.py``),
``tools/fuzz/run.py`` and ``tools/soak/run.py`` run them against a real server on loopback. A tool,
not part of the product: the wheel does not ship it (they import it with ``tools/fuzz`` on sys.path).
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import msgpack
import numpy as np

from rt_lidar.unreal_bridge.beam_call import BEAM_HITS_METHOD, encode_beam
from rt_lidar.unreal_bridge.client import AirSimClient
from rt_lidar.unreal_bridge.errors import BridgeError, RpcError

__all__ = [
    "ATTACKS",
    "Attack",
    "AttackResult",
    "LatencyWatcher",
    "full_budget_call",
    "probe",
    "rss_bytes",
    "run_attack",
]

AttackFn = Callable[[str, int, np.random.Generator], str]


@dataclass(frozen=True)
class Attack:
    """One hostile client: ``name``, the issue item it comes from and what it does."""

    name: str
    item: str
    what: str
    run: AttackFn


def rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` (Linux ``/proc``), bytes."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no VmRSS for process {pid}")


def probe(host: str, port: int, timeout: float = 5.0) -> float:
    """A normal client's round: ping and one ``getLidarData``; returns the seconds it took."""
    t0 = time.monotonic()
    with AirSimClient(host, port, timeout=timeout) as client:
        client.ping()
        client.get_lidar_data()
    return time.monotonic() - t0


@contextlib.contextmanager
def _conn(host: str, port: int, timeout: float = 3.0) -> Iterator[socket.socket]:
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        yield sock
    finally:
        sock.close()


def _request(method: str, params: list[object], msgid: int = 1) -> bytes:
    return bytes(msgpack.packb([0, msgid, method, params], use_bin_type=True))


def _answer(sock: socket.socket, timeout: float = 3.0) -> str:
    """What came back on ``sock``: the error of the first reply, ``ok``, ``closed`` or ``no answer``."""
    sock.settimeout(timeout)
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=256 << 20)
    try:
        while True:
            data = sock.recv(1 << 20)
            if not data:
                return "connection closed by the server"
            unpacker.feed(data)
            for msg in unpacker:
                if isinstance(msg, list) and len(msg) == 4 and msg[2] is not None:
                    return f"error: {_short(msg[2])}"
                return "answered ok"
    except TimeoutError:
        return "no answer"
    except OSError as exc:
        return f"connection reset ({exc.__class__.__name__})"


def _short(error: object) -> str:
    """An error string without rpclib's wrapper (the handler's own words), at most 100 characters."""
    text = str(error)
    marker = "The exception contained this information: "
    at = text.find(marker)
    return (text[at + len(marker) :] if at >= 0 else text)[:100]


def _send_all(host: str, port: int, payload: bytes) -> str:
    with _conn(host, port) as sock:
        try:
            sock.sendall(payload)
        except OSError:
            return "connection closed by the server while sending"
        return _answer(sock)


def _call(host: str, port: int, fn: Callable[[AirSimClient], object]) -> str:
    with AirSimClient(host, port, timeout=5.0) as client:
        try:
            fn(client)
        except RpcError as exc:
            return f"error: {_short(exc.error)}"
        except BridgeError as exc:
            return f"{type(exc).__name__}: {str(exc)[:100]}"
    return "answered ok"


# -- the attacks ----------------------------------------------------------------------------------


def nan_steering(host: str, port: int, rng: np.random.Generator) -> str:
    """Item 1: ``setCarControls`` with steering NaN (and inf throttle)."""
    controls = {
        "throttle": math.inf,
        "steering": math.nan,
        "brake": 0.0,
        "handbrake": False,
        "is_manual_gear": False,
        "manual_gear": 0,
        "gear_immediate": True,
    }
    return _send_all(host, port, _request("setCarControls", [controls, ""]))


def many_connections(host: str, port: int, rng: np.random.Generator) -> str:
    """Items 2 and 6: 300 connections opened and held for a second."""
    held: list[socket.socket] = []
    with contextlib.ExitStack() as stack:
        for _ in range(300):
            try:
                held.append(stack.enter_context(_conn(host, port, timeout=1.0)))
            except OSError:
                break
        time.sleep(1.0)
        closed = 0
        for sock in held:
            sock.settimeout(0.01)
            with contextlib.suppress(TimeoutError, OSError):
                closed += sock.recv(1) == b""
    return f"{len(held)} opened, {closed} closed by the server at once"


def young_flood(host: str, port: int, rng: np.random.Generator) -> str:
    """Items 2 and 6: for 3 s, a new silent connection every 5 ms, all held (every slot younger than
    a second), while a normal client probes every 0.2 s; reports the probes answered."""
    answered, tries, slowest = 0, 0, 0.0
    stop = threading.Event()

    def probing() -> None:
        nonlocal answered, tries, slowest
        while not stop.is_set():
            tries += 1
            with contextlib.suppress(BridgeError):
                slowest = max(slowest, probe(host, port, timeout=2.0))
                answered += 1
            stop.wait(0.2)

    prober = threading.Thread(target=probing, daemon=True)
    held: list[socket.socket] = []
    opened = 0
    with contextlib.ExitStack() as stack:
        prober.start()
        t_end = time.monotonic() + 3.0
        while time.monotonic() < t_end:
            if len(held) < 400:  # the attacker's own descriptors
                with contextlib.suppress(OSError):
                    held.append(stack.enter_context(_conn(host, port, timeout=0.5)))
                    opened += 1
            time.sleep(0.005)
        stop.set()
        prober.join(10)
        closed = 0
        for sock in held:
            sock.settimeout(0.01)
            with contextlib.suppress(TimeoutError, OSError):
                closed += sock.recv(1) == b""
    return (
        f"{opened} opened, {closed} closed by the server; probes answered {answered}/{tries}, "
        f"slowest {slowest:.2f} s"
    )


def catastrophic_regex(host: str, port: int, rng: np.random.Generator) -> str:
    """Item 3: name patterns that backtrack for hours in Python's ``re``."""
    t0 = time.monotonic()
    a = _call(host, port, lambda c: c.sim_list_scene_objects("(?:.*){14}#"))  # RE2: no names match
    b = _call(host, port, lambda c: c.call("simSetSegmentationObjectID", "(?:.*){14}#", 5, True))
    return f"{a}; {b}; {time.monotonic() - t0:.2f} s"


def huge_request(host: str, port: int, rng: np.random.Generator) -> str:
    """Item 4: a 100 MiB request (a bin argument)."""
    head = b"\x94\x00\x01\xb3simListSceneObjects\x91\xc6" + (100 << 20).to_bytes(4, "big")
    with _conn(host, port) as sock:
        sent = 0
        chunk = bytes(1 << 20)
        try:
            sock.sendall(head)
            for _ in range(100):
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:
            return f"closed by the server after {sent >> 20} MiB of 100"
        return f"all 100 MiB taken; then {_answer(sock)}"


def empty_arrays(host: str, port: int, rng: np.random.Generator) -> str:
    """Item 4: 4 MiB of empty arrays (64x their size once decoded, unbounded)."""
    n = 4 << 20
    payload = b"\x94\x00\x01\xb3simListSceneObjects\x91\xdd" + n.to_bytes(4, "big") + b"\x90" * n
    return _send_all(host, port, payload)


def pending_bytes(host: str, port: int, rng: np.random.Generator) -> str:
    """Item 4: six connections each sending 60 MiB of one unfinished request."""
    out = []
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(_conn(host, port)) for _ in range(6)]
        for sock in socks:
            sent = 0
            try:
                sock.sendall(b"\x94\x00\x01\xa4ping\x91\xc6" + (60 << 20).to_bytes(4, "big"))
                for _ in range(60):
                    sock.sendall(bytes(1 << 20))
                    sent += 1
            except OSError:
                pass
            out.append(sent)
    return f"MiB taken per connection before it was closed: {out}"


def image_flood(host: str, port: int, rng: np.random.Generator) -> str:
    """Item 4: ``simGetImages`` with 100 uncompressed requests, then 40 pipelined calls of 16 left
    unread for 3 s."""
    req = {"camera_name": "0", "image_type": 0, "pixels_as_float": False, "compress": False}
    first = _send_all(host, port, _request("simGetImages", [[req] * 100, "", False]))
    with _conn(host, port) as sock:
        try:
            sock.sendall(b"".join(_request("simGetImages", [[req] * 16, "", False], i) for i in range(40)))
        except OSError:
            return f"100 requests: {first}; pipelined: closed while sending"
        time.sleep(3.0)
    return f"100 requests: {first}; 40 x 16 pipelined, unread 3 s"


def long_vehicle_names(host: str, port: int, rng: np.random.Generator) -> str:
    """Item 4: ``enableApiControl`` with 100 vehicle names of (almost) 1 MiB."""
    outcomes: dict[str, int] = {}
    name = "v" * ((1 << 20) - 64)
    for _ in range(100):
        got = _send_all(host, port, _request("enableApiControl", [True, name]))
        outcomes[got[:70]] = outcomes.get(got[:70], 0) + 1
    return "; ".join(f"{k} x{v}" for k, v in outcomes.items())


def beam_backlog(host: str, port: int, rng: np.random.Generator) -> str:
    """Item 4: ``rtLidarGetBeamHits`` with 127 sub-rays after a second of sim time (the ray budget)."""
    offsets = rng.uniform(-0.002, 0.002, size=(127, 2))
    beam = encode_beam(offsets, np.ones(127))
    t0 = time.monotonic()

    def go(c: AirSimClient) -> None:
        paused = c.sim_is_paused()
        c.sim_continue_for_time(1.0)  # a second of backlog; AirSim pauses after it
        try:
            c.call(BEAM_HITS_METHOD, "", "", beam)
        finally:
            c.sim_pause(paused)  # a running sim (the soak's) keeps running

    got = _call(host, port, go)
    return f"{got}; {time.monotonic() - t0:.2f} s"


class LatencyWatcher:
    """A normal client calling ``getCarState`` every ``period_s`` in a thread; its latencies (s) and
    failures, for what a heavy call does to everyone else."""

    def __init__(self, host: str, port: int, period_s: float = 0.02, timeout: float = 10.0) -> None:
        self.latencies: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._args = (host, port, period_s, timeout)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        host, port, period_s, timeout = self._args
        with AirSimClient(host, port, timeout=timeout) as client:
            while not self._stop.is_set():
                t0 = time.monotonic()
                try:
                    client.get_car_state()
                    self.latencies.append(time.monotonic() - t0)
                except BridgeError:
                    self.failures += 1
                self._stop.wait(period_s)

    def stop(self) -> str:
        """Stop; one line: calls, p50 and max latency (ms), failures."""
        self._stop.set()
        self._thread.join(15)
        if not self.latencies:
            return f"getCarState: no answer ({self.failures} failed)"
        p50 = float(np.percentile(self.latencies, 50))
        return (
            f"getCarState meanwhile: {len(self.latencies)} calls, p50 {1e3 * p50:.1f} ms, "
            f"max {1e3 * max(self.latencies):.1f} ms, {self.failures} failed"
        )


def full_budget_call(client: AirSimClient, beam: dict[str, object]) -> tuple[int, float]:
    """A second of backlog (``simContinueForTime``) then ``rtLidarGetBeamHits`` with ``beam``: a lidar
    call at the ray budget (500 k rays by default) on a sim of a few 100 k firings a second. Returns
    the rays answered and the call's seconds."""
    client.sim_continue_for_time(1.0)
    t0 = time.monotonic()
    answer = client.call(BEAM_HITS_METHOD, "", "", beam)
    return int(answer["count"]), time.monotonic() - t0


def full_budget_calls(host: str, port: int, rng: np.random.Generator) -> str:
    """Three lidar calls at the full ray budget (7 sub-rays, a second of backlog: 500 k rays each)
    while another client calls ``getCarState`` every 20 ms: under one call lock it waited seconds."""
    beam = encode_beam(rng.uniform(-0.002, 0.002, size=(7, 2)), np.ones(7))
    watcher = LatencyWatcher(host, port)
    calls: list[tuple[int, float]] = []
    try:
        with AirSimClient(host, port, timeout=60.0) as client:
            paused = client.sim_is_paused()
            try:
                calls = [full_budget_call(client, beam) for _ in range(3)]
            finally:
                client.sim_pause(paused)  # a running sim (the soak's) keeps running
    except BridgeError as exc:
        return f"{type(exc).__name__}: {str(exc)[:100]}; {watcher.stop()}"
    took = ", ".join(f"{s:.2f}" for _, s in calls)
    return f"{len(calls)} calls of {calls[0][0]} rays ({took} s); {watcher.stop()}"


def deep_nesting(host: str, port: int, rng: np.random.Generator) -> str:
    """Item 5: arguments nested 1000 deep (a RecursionError in an unguarded server)."""
    head = b"\x94\x00\x01\xb3simListSceneObjects\x91"
    return _send_all(host, port, head + b"\x91" * 1000 + b"\x01")


def slow_clients(host: str, port: int, rng: np.random.Generator) -> str:
    """Item 6: 100 clients each dripping a request one byte every 0.25 s for 3 s."""
    payload = _request("ping", [])
    with contextlib.ExitStack() as stack:
        socks = []
        for _ in range(100):
            with contextlib.suppress(OSError):
                socks.append(stack.enter_context(_conn(host, port, timeout=0.05)))
        alive = len(socks)
        for i in range(12):
            for sock in list(socks):
                try:
                    sock.send(payload[i % len(payload) : i % len(payload) + 1])
                except OSError:
                    socks.remove(sock)
            time.sleep(0.25)
        return f"{alive} connected, {len(socks)} still open after 3 s"


def garbage(host: str, port: int, rng: np.random.Generator) -> str:
    """Random bytes, random msgpack values and truncated requests on 60 connections (seeded)."""
    counts: dict[str, int] = {}
    methods = ["ping", "getLidarData", "simGetImages", "setCarControls", "nope", "simListSceneObjects"]
    for i in range(60):
        kind = i % 3
        if kind == 0:
            payload = rng.bytes(int(rng.integers(1, 4096)))
        elif kind == 1:
            params = [_random_value(rng, 3) for _ in range(int(rng.integers(0, 4)))]
            payload = _request(str(rng.choice(methods)), params, int(rng.integers(0, 1 << 31)))
        else:
            whole = _request(str(rng.choice(methods)), [_random_value(rng, 3)])
            payload = whole[: int(rng.integers(1, max(2, len(whole))))]
        with _conn(host, port, timeout=0.5) as sock:
            try:
                sock.sendall(payload)
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            got = _answer(sock, timeout=0.5).split(":")[0]
        counts[got] = counts.get(got, 0) + 1
    return "; ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def _random_value(rng: np.random.Generator, depth: int) -> object:
    kind = int(rng.integers(0, 8 if depth > 0 else 6))
    if kind == 0:
        return int(rng.integers(-(1 << 62), 1 << 62))
    if kind == 1:
        return float(rng.choice([math.nan, math.inf, -math.inf, rng.normal() * 1e30, 0.0]))
    if kind == 2:
        return "".join(chr(int(c)) for c in rng.integers(32, 0x2FF, size=int(rng.integers(0, 40))))
    if kind == 3:
        return rng.bytes(int(rng.integers(0, 64)))
    if kind == 4:
        return bool(rng.integers(0, 2))
    if kind == 5:
        return None
    if kind == 6:
        return [_random_value(rng, depth - 1) for _ in range(int(rng.integers(0, 5)))]
    return {str(_random_value(rng, 0)): _random_value(rng, depth - 1) for _ in range(int(rng.integers(0, 4)))}


ATTACKS: tuple[Attack, ...] = (
    Attack("nan_steering", "1", "setCarControls steering NaN, throttle inf", nan_steering),
    Attack("many_connections", "2, 6", "300 connections held 1 s", many_connections),
    Attack("young_flood", "2, 6", "a silent connection every 5 ms for 3 s, all held", young_flood),
    Attack("catastrophic_regex", "3", "'(?:.*){14}#' as a name pattern, two calls", catastrophic_regex),
    Attack("huge_request", "4", "a 100 MiB request", huge_request),
    Attack("empty_arrays", "4", "4 MiB of empty arrays in one request", empty_arrays),
    Attack("pending_bytes", "4", "6 connections x 60 MiB of unfinished requests", pending_bytes),
    Attack("image_flood", "4", "simGetImages x100 uncompressed; 40 x 16 pipelined, unread", image_flood),
    Attack("long_vehicle_names", "4", "enableApiControl with 100 names of ~1 MiB", long_vehicle_names),
    Attack("beam_backlog", "4", "rtLidarGetBeamHits, 127 sub-rays, 1 s of backlog", beam_backlog),
    Attack("full_budget_calls", "3", "3 calls of 500 k rays; getCarState every 20 ms", full_budget_calls),
    Attack("deep_nesting", "5", "arguments nested 1000 deep", deep_nesting),
    Attack("slow_clients", "6", "100 clients dripping a byte every 0.25 s for 3 s", slow_clients),
    Attack("garbage", "-", "60 connections of random bytes / values / truncations (seeded)", garbage),
)
"""Every attack, in the issue's order."""


@dataclass(frozen=True)
class AttackResult:
    """What one attack did: its outcome and duration, how a normal client fared while it ran (probes
    answered / tried, the slowest answered one), and how long after it until one was answered."""

    name: str
    outcome: str
    attack_s: float
    during_ok: int
    during_tries: int
    during_max_s: float
    recover_s: float
    probe_s: float


class _Prober:
    """A normal client probing every ``period_s`` in a thread while an attack runs."""

    def __init__(self, host: str, port: int, period_s: float = 0.25, timeout: float = 5.0) -> None:
        self.ok = self.tries = 0
        self.max_s = 0.0
        self._stop = threading.Event()
        self._args = (host, port, period_s, timeout)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        host, port, period_s, timeout = self._args
        while not self._stop.is_set():
            self.tries += 1
            try:
                self.max_s = max(self.max_s, probe(host, port, timeout))
                self.ok += 1
            except BridgeError:
                pass
            self._stop.wait(period_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def run_attack(
    attack: Attack, host: str, port: int, seed: int, recover_within_s: float = 10.0
) -> AttackResult:
    """Run ``attack`` with a normal client probing alongside, then probe until one is answered (at
    most ``recover_within_s``; :class:`TimeoutError` if none is)."""
    rng = np.random.default_rng(seed)
    prober = _Prober(host, port)
    t0 = time.monotonic()
    try:
        outcome = attack.run(host, port, rng)
    except OSError as exc:  # the attacker's own socket trouble (e.g. refused at the cap)
        outcome = f"attacker saw {type(exc).__name__}: {exc}"
    finally:
        t1 = time.monotonic()
        prober.stop()
    last: Exception | None = None
    while time.monotonic() - t1 < recover_within_s:
        try:
            took = probe(host, port, timeout=max(0.5, recover_within_s - (time.monotonic() - t1)))
        except BridgeError as exc:
            last = exc
            time.sleep(0.05)
            continue
        return AttackResult(
            attack.name, outcome, t1 - t0, prober.ok, prober.tries, prober.max_s, time.monotonic() - t1, took
        )
    raise TimeoutError(f"{attack.name}: no normal client answered within {recover_within_s} s ({last})")
