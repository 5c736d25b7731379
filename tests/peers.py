"""Other people's clients, each in its own venv (the Makefile's ``peers``): where each one lives and how a
test runs a script with it. A venv elsewhere is named by its environment variable (``RT_LIDAR_AIRSIM_PEER``
and so on); a test whose peer is absent skips and says how to make it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

# name -> (environment variable, folder in the checkout, the script that builds it)
_PEERS = {
    "airsim": ("RT_LIDAR_AIRSIM_PEER", ".venv-airsim", "tools/setup_airsim_peer.sh"),
    "cosys": ("RT_LIDAR_COSYS_PEER", ".venv-cosys", "tools/setup_cosys_peer.sh"),
    "carla": ("RT_LIDAR_CARLA_PEER", ".venv-carla", "tools/setup_carla_peer.sh"),
    "ouster": ("RT_LIDAR_OUSTER_PEER", ".venv-ouster", "tools/setup_ouster_peer.sh"),
}


def peer_dir(name: str) -> Path:
    """The venv of peer ``name`` (its environment variable, else the checkout's own)."""
    env, folder, _ = _PEERS[name]
    return Path(os.environ.get(env, ROOT / folder))


def peer_python(name: str) -> Path:
    """The interpreter of peer ``name``'s venv (which may not exist)."""
    return peer_dir(name) / "bin" / "python"


def absent(name: str) -> str:
    """Why a test of peer ``name`` cannot run: the venv and the command that makes it."""
    return f"no {name} peer venv at {peer_dir(name)}: run {_PEERS[name][2]} {peer_dir(name)}"


def needs_peer(name: str) -> pytest.MarkDecorator:
    """A skip mark for tests that run peer ``name``, taken only where its venv is absent."""
    return pytest.mark.skipif(not peer_python(name).exists(), reason=absent(name))


def run_peer_json(name: str, args: list[str], timeout: float = 120) -> Any:
    """Run ``python ARGS`` in peer ``name``'s venv (skip where it is absent); it must exit 0, and its
    last line of output is JSON, returned parsed."""
    python = peer_python(name)
    if not python.exists():
        pytest.skip(absent(name))
    proc = subprocess.run([str(python), *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
