#!/usr/bin/env bash
# Create (idempotently) a separate virtual environment holding CARLA's Python client (`carla` from the
# public index), used only as a test peer: tests/rt_lidar/test_carla.py checks the frame and weather
# conversions against its types (carla.Transform, carla.Rotation, carla.WeatherParameters,
# carla.SemanticLidarDetection). No CARLA server runs here. Our code imports carla only for
# `rt-lidar run --carla` (the `carla` extra).
#
#   tools/setup_carla_peer.sh [DIR]          # DIR defaults to .venv-carla
#   PYTHON=python3.11 tools/setup_carla_peer.sh
set -euo pipefail

DIR="${1:-.venv-carla}"
PY="${PYTHON:-python3}"

if [ ! -x "$DIR/bin/python" ]; then
    "$PY" -m venv "$DIR"
fi
PIP=("$DIR/bin/python" -m pip --disable-pip-version-check -q)

if ! "$DIR/bin/python" -c "import carla, numpy" >/dev/null 2>&1; then
    "${PIP[@]}" install numpy "carla>=0.9.14,<0.10"
fi

"$DIR/bin/python" - "$DIR" <<'PY'
import importlib.metadata as md
import sys
print("peer client ready in", sys.argv[1] + ":", "carla", md.version("carla"))
PY
