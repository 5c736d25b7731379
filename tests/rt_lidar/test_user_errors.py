"""Every user error of the main use is one line on stderr and exit 2, run as a user runs it (``python -m
rt_lidar.cli.main ...`` in a subprocess): a missing or broken ``--scene`` mesh (in-process, bridged and
``serve``), a missing optional package (the line names the ``pip install 'rt-lidar[EXTRA]'``), a pcap
cut mid-record (replayed, with a one-line warning saying what was read), and ``run --reconnect``
saying what it waits for.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.extras import MissingExtraError, missing_extra, require
from rt_lidar.sinks.pcap import PcapWriter

REPO = Path(__file__).resolve().parents[2]


def cli(
    args: list[str], cwd: Path, prelude: str = "", timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``rt-lidar ARGS`` in a fresh interpreter (``prelude`` runs first: hides a package, say)."""
    code = f"import sys; {prelude}; from rt_lidar.cli.main import main; sys.exit(main(sys.argv[1:]))"
    command = ["-c", code] if prelude else ["-m", "rt_lidar.cli.main"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, *command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def one_error_line(run: subprocess.CompletedProcess[str], command: str) -> str:
    """The single stderr line of a run that failed as a user error should (exit 2, no traceback)."""
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and len(lines) == 1, run.stderr
    assert lines[0].startswith(f"rt-lidar {command}: error: "), lines[0]
    return lines[0]


# -- --scene mesh files ------------------------------------------------------------------------------


@pytest.fixture
def broken_mesh(tmp_path: Path) -> Path:
    path = tmp_path / "broken.obj"
    path.write_text("this is not\nan OBJ mesh\n")
    return path


@pytest.mark.parametrize(
    "command",
    [["demo", "--in-process", "--frames", "1"], ["demo", "--frames", "1"], ["serve", "--port", "0"]],
    ids=["in-process", "bridged", "serve"],
)
def test_missing_scene_mesh_is_one_line(tmp_path: Path, command: list[str]) -> None:
    run = cli([*command, "--scene", "nowhere/street.glb"], tmp_path)
    line = one_error_line(run, command[0])
    assert "nowhere/street.glb: no such mesh file" in line and "--scene" in line


@pytest.mark.parametrize(
    "command",
    [["demo", "--in-process", "--frames", "1"], ["demo", "--frames", "1"]],
    ids=["in-process", "bridged"],
)
def test_broken_scene_mesh_is_one_line(tmp_path: Path, broken_mesh: Path, command: list[str]) -> None:
    run = cli([*command, "--scene", str(broken_mesh)], tmp_path)
    assert f"{broken_mesh}: the file holds no triangle mesh" in one_error_line(run, "demo")


# -- optional packages -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hidden", "args", "extra"),
    [
        ("pyqtgraph", ["view", "--screenshot", "x.png"], "viewer"),
        ("PySide6", ["view", "--screenshot", "x.png"], "viewer"),
        ("ray", ["generate", str(REPO / "tools/sweeps/small.toml"), "--out", "ds"], "dataset"),
        ("torch", ["rinet", "train", "pairs", "--out", "model"], "train"),
        ("matplotlib", ["validate", "--out", "report"], "validate"),
    ],
)
def test_missing_extra_names_its_pip_install(
    tmp_path: Path, hidden: str, args: list[str], extra: str
) -> None:
    # a None in sys.modules makes `import hidden` raise ModuleNotFoundError, as an absent package does
    run = cli(args, tmp_path, prelude=f"sys.modules[{hidden!r}] = None")
    line = one_error_line(run, args[0])
    assert f"{hidden} is not installed: pip install 'rt-lidar[{extra}]'" in line
    assert not (tmp_path / "ds").exists() and not (tmp_path / "model").exists()


def test_require_names_the_extra_and_leaves_other_import_errors() -> None:
    # as if not installed, whether or not an earlier test imported it
    hidden = {name: sys.modules.get(name) for name in ("cyclonedds", "cyclonedds.domain")}
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        with pytest.raises(MissingExtraError, match=r"the ros2 sink needs cyclonedds, .*rt-lidar\[ros2\]"):
            require("cyclonedds.domain", "the ros2 sink")
    finally:
        for name, module in hidden.items():
            if module is None:
                del sys.modules[name]
            else:
                sys.modules[name] = module
    with pytest.raises(MissingExtraError, match=r"rt-lidar\[mine\]"):
        require("no_such_package_rt_lidar_x", extra="mine")
    with pytest.raises(ModuleNotFoundError):  # not an optional package of ours: a bug, not a user error
        require("no_such_package_rt_lidar_y")
    assert missing_extra(ModuleNotFoundError(name="numpy")) is None
    assert numpy_is(require("numpy"))


def numpy_is(module: object) -> bool:
    return module is np


# -- a pcap cut mid-record ---------------------------------------------------------------------------


def test_pcap_cut_mid_record_replays_what_was_read_and_says_so(tmp_path: Path) -> None:
    sizes, n = 1206, 40
    path = tmp_path / "whole.pcap"
    writer = PcapWriter(path)
    payloads = (np.arange(n * sizes) % 251).astype(np.uint8).reshape(n, sizes)
    stamps = 1_700_000_000_000_000_000 + np.arange(n, dtype=np.int64) * 1_000_000
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.bind(("127.0.0.1", 0))
        rx.settimeout(0.5)
        port = rx.getsockname()[1]
        writer.write_batch(payloads, stamps, "192.168.1.201", "255.255.255.255", 2368, port)
        writer.close()
        record = 16 + 42 + sizes
        cut = tmp_path / "cut.pcap"
        cut.write_bytes(path.read_bytes()[: 24 + 25 * record + 300])  # 25 whole records and a torn 26th
        run = cli(["replay", str(cut), "--sink", f"udp:127.0.0.1:{port}"], tmp_path)
        got = 0
        try:
            while rx.recv(65536):
                got += 1
        except TimeoutError:
            pass
    assert run.returncode == 0, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith("rt-lidar replay: warning: ") and str(cut) in lines[0]
    assert "inside record 25" in lines[0] and "read 25 whole records" in lines[0]
    assert f"{24 + 25 * record:,} bytes" in lines[0]
    assert got == 25


# -- run --reconnect ---------------------------------------------------------------------------------


LIVE_ARGS = ["--preset", "VLP-16", "--frames", "2", "--out", "live", "--quiet"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_reconnect_says_what_it_waits_for_and_goes_on(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    base = [sys.executable, "-m", "rt_lidar.cli.main"]
    run = subprocess.Popen(
        [*base, "run", "--reconnect", "--lockstep", "--airsim", f"127.0.0.1:{port}", *LIVE_ARGS],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert run.stderr is not None
    t0 = time.monotonic()
    first = run.stderr.readline()  # said at once, not after the wait
    assert time.monotonic() - t0 < 30
    assert first.startswith(f"rt-lidar run: waiting up to 30 s for an AirSim server at 127.0.0.1:{port}"), (
        first
    )
    assert "--reconnect" in first and "refused" in first
    server = subprocess.Popen(
        [*base, "serve", "--port", str(port), "--preset", "VLP-16"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        rest = run.communicate(timeout=120)[1]
    finally:
        server.terminate()
        server.wait(10)
    assert run.returncode == 0, rest
    assert f"the AirSim server at 127.0.0.1:{port} answers" in rest
    assert len(list((tmp_path / "live" / "scans").glob("*.pcd"))) == 2


def test_reconnect_to_nothing_ends_in_one_line_naming_the_wait(tmp_path: Path) -> None:
    port = free_port()
    run = cli(["run", "--airsim", f"127.0.0.1:{port}", "--frames", "1", "--out", "live", "--quiet"], tmp_path)
    line = one_error_line(run, "run")
    assert f"no AirSim server answers at 127.0.0.1:{port}" in line


def test_serve_on_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = cli(["serve", "--port", str(port), "--preset", "VLP-16"], tmp_path)
    line = one_error_line(run, "serve")
    assert f"cannot listen on 127.0.0.1:{port}" in line and "--port 0" in line
