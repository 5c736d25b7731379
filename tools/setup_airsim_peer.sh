#!/usr/bin/env bash
# Create (idempotently) a separate virtual environment holding the stock AirSim 1.8.1 Python client,
# used only as a test peer / benchmark reference for unreal_bridge.  Our own code never imports it.
#
#   tools/setup_airsim_peer.sh [DIR]          # DIR defaults to .venv-airsim
#   PYTHON=python3.11 tools/setup_airsim_peer.sh
#   WITH_COSYS=0 tools/setup_airsim_peer.sh   # skip the cosysairsim (Cosys-AirSim) client
#
# The stock client cannot be installed the ordinary way (its setup.py imports numpy, and its declared
# msgpack-rpc-python/tornado-4 stack is pure Python on 3.11 and ~170x slower); see DESIGN.md "Known traps".
set -euo pipefail

DIR="${1:-.venv-airsim}"
PY="${PYTHON:-python3}"

if [ ! -x "$DIR/bin/python" ]; then
    "$PY" -m venv "$DIR"
fi
PIP=("$DIR/bin/python" -m pip --disable-pip-version-check -q)

if ! "$DIR/bin/python" -c "import airsim, msgpackrpc" >/dev/null 2>&1; then
    "${PIP[@]}" install numpy wheel rpc-msgpack
    "${PIP[@]}" install --no-build-isolation --no-deps airsim==1.8.1
fi

if [ "${WITH_COSYS:-1}" = "1" ] && ! "$DIR/bin/python" -c "import cosysairsim" >/dev/null 2>&1; then
    "${PIP[@]}" install --no-build-isolation --no-deps cosysairsim
fi

"$DIR/bin/python" - "$DIR" <<'PY'
import importlib.metadata as md
import sys
names = [n for n in ("airsim", "cosysairsim") if __import__("importlib").util.find_spec(n)]
print("peer clients ready in", sys.argv[1] + ":", ", ".join(f"{n} {md.version(n)}" for n in names))
PY
