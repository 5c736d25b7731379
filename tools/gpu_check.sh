#!/usr/bin/env bash
# The checks of a CUDA machine, in one run: the CuPy kernels against their NumPy twins (the kernel
# tests' cupy backend, the BVH cast against Embree among them), RINet on every runtime present (the
# torch runtime on CUDA among them), the --device cuda frame against the CPU's, then
# tools/bench/bench_gpu.py (kernel and frame-loop timings, RINet timings) and
# tools/bench/bench_gpu_frame.py (four VLS-128s with --beam full, dual returns and rain: rays per second,
# real-time factor, the GPU scans' statistics against the CPU's). Results go to $OUT (or out/gpu):
# nvidia-smi.txt, pytest.txt, gpu.json, bench.txt, gpu_frame.json, bench_frame.txt.
#
# Run from the repository root with the machine's own Python (CuPy, PyTorch, ONNX Runtime present).
# Packages that machine lacks travel as wheels in .whl/ (docs/performance-notes.md, "CUDA kernels",
# says which and how to fetch them); they are installed into /tmp/site, never over the machine's own.
set -u
out=${OUT:-out/gpu}
mkdir -p "$out"
py=${PYTHON:-python3}
if compgen -G ".whl/*.whl" >/dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "gpu_check: installing .whl/ failed" >&2; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
{ nvidia-smi; nvidia-smi -q -d CLOCK,POWER | head -60; "$py" -c 'import sys, numpy, cupy, torch; print(sys.version); print("numpy", numpy.__version__, "cupy", cupy.__version__, "torch", torch.__version__, torch.version.cuda)'; } \
  >"$out/nvidia-smi.txt" 2>&1
"$py" -m pytest -q -p no:cacheprovider -rs tests/kernels tests/rt_lidar/rinet/test_rinet_runtime.py \
  tests/rt_lidar/rinet/test_rinet_torch_runtime.py tests/rt_lidar/test_kernels_device.py \
  tests/rt_lidar/test_device_frame.py 2>&1 | tee "$out/pytest.txt" | tail -25
tests_rc=${PIPESTATUS[0]}
"$py" tools/bench/bench_gpu.py --out "$out/gpu.json" "$@" 2>&1 | tee "$out/bench.txt" | tail -5
bench_rc=${PIPESTATUS[0]}
"$py" tools/bench/bench_gpu_frame.py --device cuda --frames ${GPU_FRAME_FRAMES:-10} --out "$out/gpu_frame.json" 2>&1 \
  | tee "$out/bench_frame.txt" | tail -5
frame_rc=${PIPESTATUS[0]}
echo "gpu_check: tests rc $tests_rc, bench rc $bench_rc, frame bench rc $frame_rc"
exit $(( tests_rc || bench_rc || frame_rc ))
