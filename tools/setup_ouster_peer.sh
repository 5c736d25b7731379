#!/usr/bin/env bash
# Create the ouster-sdk test peer: a venv of its own (default .venv-ouster), because ouster-sdk 1.0.x
# pins rosbags==0.9.23, which clashes with the rosbags the project uses. The tests under
# tests/rt_lidar/sinks/ run it in a subprocess and skip, naming this script, when it is absent.
#   usage: tools/setup_ouster_peer.sh [VENV_DIR]
set -euo pipefail
VENV="${1:-.venv-ouster}"
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "ouster-sdk>=1.0,<1.1" "numpy>=1.26,<3"
"$VENV/bin/python" -c "import ouster.sdk, ouster.sdk.core; print('ouster-sdk peer ready:', ouster.sdk.__version__ if hasattr(ouster.sdk, '__version__') else 'ok')"
