#!/usr/bin/env bash
# Create (idempotently) a separate virtual environment holding Cosys-AirSim's Python client
# (`cosysairsim` from the public index, with its declared numpy + rpc-msgpack), used only as a test peer:
# tests/rt_lidar/test_cosys.py reads `rt-lidar serve --flavor cosys` with it. Our code never imports it.
#
#   tools/setup_cosys_peer.sh [DIR]          # DIR defaults to .venv-cosys
#   PYTHON=python3.11 tools/setup_cosys_peer.sh
set -euo pipefail

DIR="${1:-.venv-cosys}"
PY="${PYTHON:-python3}"

if [ ! -x "$DIR/bin/python" ]; then
    "$PY" -m venv "$DIR"
fi
PIP=("$DIR/bin/python" -m pip --disable-pip-version-check -q)

if ! "$DIR/bin/python" -c "import cosysairsim, msgpackrpc" >/dev/null 2>&1; then
    "${PIP[@]}" install "cosysairsim>=3.3,<4"
fi

"$DIR/bin/python" - "$DIR" <<'PY'
import importlib.metadata as md
import sys
print("peer client ready in", sys.argv[1] + ":", "cosysairsim", md.version("cosysairsim"))
PY
