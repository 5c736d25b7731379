#!/usr/bin/env bash
# The device check of a lent CUDA machine, ONE script, under 5 minutes on an H100 (a budget of
# GPU_CHECK_BUDGET_S, default 280 s, shared by the steps in order of importance; a step that would not fit
# is skipped and says so). From the repository root, results under $OUT (or out/gpu):
#   0. tools/bench/gpu_preflight.py -> preflight.json: the Python, this project's imports, the compiled
#      twins, CuPy (imported, a device seen, a kernel run) and nvcc. Where CuPy is missing it asks a package
#      registry for the wheel of the driver's CUDA version (installed into /tmp/site, never over the
#      machine's own) and, where none answers, says so in one line. Nothing else is installed from a network:
#      wheels the machine lacks travel in .whl/ (installed into /tmp/site first).
#   1. tools/bench/bench_gpu_frame.py --scenario full -> gpu_frame.json: the scenario, the
#      four-VLS-128 rig (docs/rigs/four-vls128.toml) with --beam full, dual returns and 25 mm/h rain, the
#      CPU frame then the device-resident frame: rays/s, real-time factor, copies, each sensor's scan
#      statistics against the CPU's (points, second-return, rain and bloom shares, bundled share, medians),
#      the recorded casts replayed through Embree and the kernel.
#   2. the same with one ray a pulse (--scenario dual-rain) -> gpu_frame_device.json.
#   3. the same with sunlight, a wet road and crosstalk (--scenario sun-wet-crosstalk) -> gpu_frame_extras.json:
#      each sensor's sunlight false alarms, wet-road ghosts, rain/spray and crosstalk false points a scan too.
#   4. the parity tests on CuPy -> pytest.txt (and pytest_extras.txt: sunlight, wet road, crosstalk);
#      5. tools/bench/bench_gpu.py -> gpu.json.
#   6. tools/bench/gpu_check_summary.py -> gpu_check.json: the numbers against the targets (>= 100 M rays/s,
#      >= 10x real time), the statistics' differences, preflight, each step's exit code or why it was skipped.
# If CuPy fails (missing, no device, a kernel that does not build), steps 1-3 still record the CPU's
# figures and the error (device_error); the script's exit code is then non-zero.
#
# --dry-run: no GPU needed (a test runs it here): the preflight without asking a registry, the frame
# benchmark on the CUDA source built for the CPU (one VLP-16, one frame; --beam full, one ray a pulse, and
# with sunlight, a wet road and a second VLP-16's crosstalk), and its gpu_check.json.
set -u
out=${OUT:-out/gpu}
mkdir -p "$out"
py=${PYTHON:-python3}
budget=${GPU_CHECK_BUDGET_S:-280}
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
rcs=()
# the seconds a step may take: at most $1, and what is left of the budget less 10 s for the summary
slot() {
  local left=$(( budget - SECONDS - 10 ))
  (( left < $1 )) && echo "$left" || echo "$1"
}
# run STEP MAX_S CMD...: the command under its slot's timeout, or skipped (rc 125) when under 15 s are left
run() {
  local name=$1 max=$2; shift 2
  local t; t=$(slot "$max")
  if (( t < 15 )); then
    echo "gpu_check: $name skipped: ${t}s of the ${budget}s budget left" | tee -a "$out/skipped.txt"
    rcs+=("$name=125"); return 0
  fi
  timeout "$t" "$@"
  local rc=$?
  (( rc == 124 )) && echo "gpu_check: $name stopped at its ${t}s limit" | tee -a "$out/skipped.txt"
  rcs+=("$name=$rc")
}
if [ "${1:-}" = "--dry-run" ]; then
  "$py" tools/bench/gpu_preflight.py "$out" --offline >"$out/preflight.txt" 2>&1
  rcs+=("preflight=$?")
  run device_frame 300 "$py" tools/bench/bench_gpu_frame.py --device cuda-source-on-cpu --dry-run \
    --scenario all --out "$out/gpu_frame_device.json" >"$out/bench_frame_device.txt" 2>&1
  "$py" tools/bench/gpu_check_summary.py "$out" "${rcs[@]}" >/dev/null
  device_rc=${rcs[1]#*=}
  echo "gpu_check --dry-run: ${rcs[*]} ($out/gpu_check.json)"
  exit "$device_rc"
fi
if compgen -G ".whl/*.whl" >/dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || echo "gpu_check: installing .whl/ failed; going on with what the machine has" >&2
fi
export PYTHONPATH=/tmp/site:$PYTHONPATH
{ nvidia-smi; nvidia-smi -q -d CLOCK,POWER | head -60; } >"$out/nvidia-smi.txt" 2>&1
run preflight 170 "$py" tools/bench/gpu_preflight.py "$out" --site /tmp/site >"$out/preflight.txt" 2>&1
cat "$out/preflight.txt"
# the frame first (the numbers issue 43 asks for), each scenario in its own file: --beam full (fewer
# frames: its CPU side is the slow one; the cast replayed once), then one ray a pulse
run full_frame 110 "$py" tools/bench/bench_gpu_frame.py --device cuda --scenario full \
  --frames "${GPU_FULL_FRAMES:-6}" --repeat 1 --out "$out/gpu_frame.json" >"$out/bench_frame.txt" 2>&1
tail -3 "$out/bench_frame.txt"
run device_frame 75 "$py" tools/bench/bench_gpu_frame.py --device cuda --scenario dual-rain \
  --frames "${GPU_FRAME_FRAMES:-10}" --out "$out/gpu_frame_device.json" >"$out/bench_frame_device.txt" 2>&1
tail -3 "$out/bench_frame_device.txt"
run sun_wet_crosstalk 45 "$py" tools/bench/bench_gpu_frame.py --device cuda --scenario sun-wet-crosstalk \
  --frames "${GPU_EXTRAS_FRAMES:-6}" --out "$out/gpu_frame_extras.json" >"$out/bench_frame_extras.txt" 2>&1
tail -3 "$out/bench_frame_extras.txt"
run tests 60 "$py" -m pytest -q -p no:cacheprovider -rs tests/kernels tests/rt_lidar/test_kernels_device.py \
  tests/rt_lidar/test_device_frame.py tests/rt_lidar/test_device_resident_frame.py \
  tests/rt_lidar/test_device_beam_probe.py tests/rt_lidar/test_serve_device.py \
  tests/rt_lidar/rinet/test_rinet_runtime.py tests/rt_lidar/rinet/test_rinet_torch_runtime.py \
  >"$out/pytest.txt" 2>&1
tail -25 "$out/pytest.txt"
run tests_extras 30 "$py" -m pytest -q -p no:cacheprovider -rs tests/rt_lidar/test_device_sun_wet_crosstalk.py \
  -k "cuda and not source" >"$out/pytest_extras.txt" 2>&1
tail -5 "$out/pytest_extras.txt"
run bench 25 "$py" tools/bench/bench_gpu.py --out "$out/gpu.json" "$@" >"$out/bench.txt" 2>&1
tail -5 "$out/bench.txt"
"$py" tools/bench/gpu_check_summary.py "$out" "${rcs[@]}" | head -60
echo "gpu_check: ${rcs[*]} in ${SECONDS}s"
for r in "${rcs[@]}"; do [ "${r#*=}" = 0 ] || exit 1; done
exit 0
