# rt-lidar: `make demo` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BASE   := $(VENV)/.base
# Debian packages the tests need (installed with apt when running as root and missing).
SYS_PKGS ?= xvfb xauth libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-randr0 \
	libxcb-shape0 libxcb-xkb1 libxcb-cursor0 libxkbcommon0 libxkbcommon-x11-0 libgl1 libegl1 libgl1-mesa-dri \
	libglx-mesa0 libegl-mesa0 libfontconfig1 libdbus-1-3 libglib2.0-0

PEERS  := .venv-airsim/.installed .venv-ouster/.installed .venv-cosys/.installed .venv-carla/.installed

.PHONY: demo test lint typecheck unit bench sysdeps peers clean

sysdeps:
	@missing=""; for p in $(SYS_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "apt: installing$$missing"; apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "warning: missing system packages:$$missing (run as root or install them)"; fi; \
	fi

# What the demo needs: the base install (no PyTorch, Ray or Qt).
$(BASE): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	@touch $(BASE)

# What the tests need: every extra. torch==2.13.0 is PyTorch's CPU build (on this machine's disk; a
# looser pin would pull a multi-GB CUDA build from the public index).
$(STAMP): $(BASE) pyproject.toml
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[dev,viewer,train,dataset,ros2]"
	@touch $(STAMP)

# Other people's clients the tests talk to, each in its own environment (their pins clash with ours).
.venv-airsim/.installed: tools/setup_airsim_peer.sh
	bash tools/setup_airsim_peer.sh .venv-airsim
	@touch $@

.venv-ouster/.installed: tools/setup_ouster_peer.sh
	bash tools/setup_ouster_peer.sh .venv-ouster
	@touch $@

.venv-cosys/.installed: tools/setup_cosys_peer.sh
	bash tools/setup_cosys_peer.sh .venv-cosys
	@touch $@

.venv-carla/.installed: tools/setup_carla_peer.sh
	bash tools/setup_carla_peer.sh .venv-carla
	@touch $@

peers: $(PEERS)

demo: $(BASE)
	$(BIN)/rt-lidar demo --out out/demo --overwrite

lint: $(STAMP)
	$(BIN)/ruff check rt_lidar unreal_bridge kernels tests tools
	$(BIN)/ruff format --check rt_lidar unreal_bridge kernels tests tools

typecheck: $(STAMP)
	$(BIN)/mypy

unit: sysdeps $(STAMP) peers
	$(BIN)/python -m pytest -q

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python tools/bench/run_all.py --out docs/bench; $(BIN)/python tools/bench/write_report.py

clean:
	rm -rf $(VENV) .venv-airsim .venv-ouster .venv-cosys .venv-carla out .mypy_cache .pytest_cache .ruff_cache
