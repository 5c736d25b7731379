#!/usr/bin/env bash
# The checks of a CUDA machine, in one run (under 5 minutes on an H100; each step has its own timeout):
# the CuPy kernels against their NumPy twins (the kernel tests' cupy backend, the BVH cast against Embree
# among them), RINet on every runtime present (the torch runtime on CUDA among them), the --device cuda
# frame against the CPU's (the device-resident frame, serve --device), then tools/bench/bench_gpu.py
# (kernel and frame-loop timings, RINet timings) and tools/bench/bench_gpu_frame.py (four VLS-128s with
# dual returns and 25 mm/h rain, with --beam full and with one ray a pulse, as the device-resident frame;
# rays per second, real-time factor, copies, the GPU scans' statistics against the CPU's). Results go to
# $OUT (or out/gpu): nvidia-smi.txt, pytest.txt, gpu.json, bench.txt, gpu_frame_device.json (the device
# frame), gpu_frame.json (--beam full), bench_frame*.txt, and gpu_check.json (tools/bench/gpu_check_summary.py: the numbers against the targets, exit codes).
#
# --dry-run: no GPU needed: only the frame benchmark, on the CUDA source built for the CPU, one VLP-16,
# one frame (a test runs it), and its gpu_check.json.
#
# Run from the repository root with the machine's own Python (CuPy, PyTorch, ONNX Runtime present).
# Packages that machine lacks travel as wheels in .whl/ (docs/performance-notes.md, "CUDA kernels",
# says which and how to fetch them); they are installed into /tmp/site, never over the machine's own.
set -u
out=${OUT:-out/gpu}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
if [ "${1:-}" = "--dry-run" ]; then
  timeout 300 "$py" tools/bench/bench_gpu_frame.py --device cuda-source-on-cpu --dry-run --scenario dual-rain \
    --out "$out/gpu_frame_device.json" >"$out/bench_frame_device.txt" 2>&1
  device_rc=$?
  "$py" tools/bench/gpu_check_summary.py "$out" device_frame=$device_rc >/dev/null
  echo "gpu_check --dry-run: device frame rc $device_rc ($out/gpu_check.json)"
  exit $device_rc
fi
if compgen -G ".whl/*.whl" >/dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "gpu_check: installing .whl/ failed" >&2; exit 1; }
  export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
{ nvidia-smi; nvidia-smi -q -d CLOCK,POWER | head -60; "$py" -c 'import sys, numpy, cupy, torch; print(sys.version); print("numpy", numpy.__version__, "cupy", cupy.__version__, "torch", torch.__version__, torch.version.cuda)'; } \
  >"$out/nvidia-smi.txt" 2>&1
# the frame first (the numbers issue 43 asks for), each scenario in its own file: --beam full (fewer
# frames: its CPU side is the slow one; the cast replayed once), then one ray a pulse
timeout 100 "$py" tools/bench/bench_gpu_frame.py --device cuda --scenario full --frames ${GPU_FULL_FRAMES:-6} --repeat 1 \
  --out "$out/gpu_frame.json" 2>&1 | tee "$out/bench_frame.txt" | tail -3
frame_rc=${PIPESTATUS[0]}
timeout 80 "$py" tools/bench/bench_gpu_frame.py --device cuda --scenario dual-rain --frames ${GPU_FRAME_FRAMES:-10} \
  --out "$out/gpu_frame_device.json" 2>&1 | tee "$out/bench_frame_device.txt" | tail -3
device_rc=${PIPESTATUS[0]}
timeout 75 "$py" -m pytest -q -p no:cacheprovider -rs tests/kernels tests/rt_lidar/rinet/test_rinet_runtime.py \
  tests/rt_lidar/rinet/test_rinet_torch_runtime.py tests/rt_lidar/test_kernels_device.py \
  tests/rt_lidar/test_device_frame.py tests/rt_lidar/test_device_resident_frame.py \
  tests/rt_lidar/test_serve_device.py 2>&1 | tee "$out/pytest.txt" | tail -25
tests_rc=${PIPESTATUS[0]}
timeout 30 "$py" tools/bench/bench_gpu.py --out "$out/gpu.json" "$@" 2>&1 | tee "$out/bench.txt" | tail -5
bench_rc=${PIPESTATUS[0]}
"$py" tools/bench/gpu_check_summary.py "$out" device_frame=$device_rc full_frame=$frame_rc tests=$tests_rc \
  bench=$bench_rc | head -40
echo "gpu_check: device frame rc $device_rc, --beam full frame rc $frame_rc, tests rc $tests_rc, bench rc $bench_rc"
exit $(( device_rc || frame_rc || tests_rc || bench_rc ))
