#!/usr/bin/env bash
# The GPU checks in one go, on a GPU machine, from the repository root: unpacks binaries built elsewhere
# (gpu-pack/pack.tar.xz: bin/ + the shared libraries the GPU machine lacks, made by tools/gpu/pack.sh),
# then runs the GPU tests, benchmarks and the GPU screenshot. Steps: comma list in $1 (default: all).
# Everything goes to $OUT (default ./gpu-out: log.txt + result files).
set -uo pipefail
STEPS=${1:-info,kernels,profiler,run,nan,bench,tune,hook,gui,frame}
OUT=${OUT:-$PWD/gpu-out}
PACK=${SPARGE_PACK_DIR:-gpu-pack}
mkdir -p "$OUT" /tmp/sp
tar -xJf "$PACK/pack.tar.xz" -C /tmp/sp
# The bundled data beside the unpacked programs (bin/../share/sparge-studio), from this repository.
mkdir -p /tmp/sp/share/sparge-studio
ln -sfn "$PWD/captures/sample.h5" /tmp/sp/share/sparge-studio/sample.h5
ln -sfn "$PWD/assets/fonts" /tmp/sp/share/sparge-studio/fonts
export LD_LIBRARY_PATH=/tmp/sp/lib:${LD_LIBRARY_PATH:-}
B=/tmp/sp/bin
has() { [[ ",$STEPS," == *",$1,"* ]]; }
# Off-screen GL on the NVIDIA driver: the glvnd loader packages from the pack, and the driver's EGL vendor
# file where container runtimes put it.
use_nvidia_egl() {
  for f in "$PACK"/gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  local vendor=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  [ -f "$vendor" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$vendor
  unset DISPLAY
}
SAMPLE_ARGS=(--theta=-0.1 --tau 0.95 --sink --lambda 3)  # the README's "similarity filter off" setting
LOG=$OUT/log.txt
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
  if has kernels; then
    echo "== kernel tests"; timeout 240 $B/sparge_kernel_tests --gtest_brief=1 2>&1 | tail -25
  fi
  if has profiler; then
    echo "== profiler GPU tests"
    timeout 120 $B/sparge_profiler_gpu_tests 2>&1 | grep -v "^\[ RUN" | tail -25
    echo "== profiler without libcupti (must fall back to CUDA events)"
    timeout 60 $B/sparge_profiler_nocupti_tests 2>&1 | tail -4
    SPARGE_CUPTI_LIBRARY=/nope timeout 60 $B/sparge run --engine cuda --entry l20_s000 --repeat 3 \
      --summary-only 2>&1 | grep -E "timings:|clock source|speedup"
  fi
  if has run; then
    echo "== sample capture: cuda vs cpu engine"
    timeout 120 $B/sparge run --engine cuda "${SAMPLE_ARGS[@]}" --summary-only --repeat 5 \
      --timings "$OUT/timings_sample.json" 2>&1 | tail -40
    timeout 60 $B/sparge run --engine cuda "${SAMPLE_ARGS[@]}" --repeat 5 --entry l20_s000 \
      --timings "$OUT/timings_sample.trace.json" 2>&1 | tail -5
    timeout 120 $B/sparge run --engine cpu "${SAMPLE_ARGS[@]}" --summary-only 2>&1 | grep "all heads"
    echo "== synthetic 32 heads x 16K x 128 through the CLI (CUPTI timings)"
    $B/sparge synth /tmp/sp/big.h5 --heads 32 --tokens 16384 --dim 128 >/dev/null
    timeout 240 $B/sparge run /tmp/sp/big.h5 --engine cuda --theta=-0.1 --topk 0.2 --summary-only \
      --repeat 10 --timings "$OUT/timings_16k.json" 2>&1 | tail -20
  fi
  if has nan; then
    echo "== NaN/Inf inputs on the CUDA engine (must not crash)"
    python3 tests/cli/make_nan_capture.py /tmp/sp/nan.h5
    for a in "--tau 0.9" "--topk 0.3 --block 64x128 --sink"; do
      timeout 60 $B/sparge run /tmp/sp/nan.h5 --engine cuda $a 2>&1 | tail -6; echo "rc=${PIPESTATUS[0]}"
    done
  fi
  if has densecheck; then
    echo "== all-dense runs use the dense kernel: error vs the fp32 reference, and memcheck"
    for c in "" "--causal"; do
      $B/sparge synth /tmp/sp/d.h5 --heads 4 --kv-heads 2 --tokens 1000 --kv-tokens 1100 --dim 64 $c \
        >/dev/null
      for g in 128x64 64x128; do
        timeout 60 $B/sparge run /tmp/sp/d.h5 --engine cuda --dense --block $g --summary-only 2>&1 \
          | grep "all heads"
      done
      timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
        $B/sparge run /tmp/sp/d.h5 --engine cuda --dense --summary-only 2>&1 | tail -2
      echo "memcheck rc=${PIPESTATUS[0]}"
    done
  fi
  if has bench; then
    echo "== bench"  # ~30 s of it the 200 ms warm-up before each measurement
    timeout 260 $B/sparge bench --tokens 4096,16384,32768 --dims 64,128 --causal 0,1 \
      --topk 1.0,0.5,0.2,0.1 --geometry 128x64 --repeat 10 --json "$OUT/bench.json" \
      --timings "$OUT/bench_kernels.csv" 2>&1 | tail -60
    PYTHONUNBUFFERED=1 timeout 150 python3 bench/compare_torch.py "$OUT/bench.json" --repeat 10 2>&1 \
      | tail -30
  fi
  if has tune; then
    echo "== tuner on the GPU: 32 heads x 16K x 128"
    timeout 200 $B/sparge_tuner_bench --engine cuda --heads 32 --tokens 16384 --dim 128 2>&1 | tail -8
    timeout 100 $B/sparge tune --l1 0.05 --l2 0.06 --sink --engine cuda -o /tmp/sp/p.json 2>&1 | tail -24
    timeout 100 $B/sparge run --engine cuda --params /tmp/sp/p.json --report /tmp/sp/r.json --summary-only \
      >/dev/null 2>&1 && python3 tests/tuner/check_report.py /tmp/sp/p.json /tmp/sp/r.json
  fi
  if has hook; then
    echo "== capture hook pytest (torch on GPU)"
    SPARGE_BIN=$B/sparge timeout 200 bash tools/gpu/capture_hook_check.sh 2>&1 | tail -15
  fi
  if has gui; then
    echo "== GUI screenshots with the CUDA engine (EGL on the NVIDIA driver): main view, kernel view, timings"
    use_nvidia_egl
    # cuDNN's fused attention is the profile's dense baseline when its library is there (PyTorch's wheel).
    export SPARGE_CUDNN_LIBRARY=${SPARGE_CUDNN_LIBRARY:-$(find /opt /usr/local/lib /usr/lib/python3* \
      -name 'libcudnn.so.9' 2>/dev/null | head -1)}
    GUI_SAMPLE=(--engine cuda --backend egl --entry l20_s000 --head 8 --set theta=-0.1 --set tau=0.95
      --set sink=1 --set lambda=3 --size 1600x1000 --frames 6 --timeout 100)
    timeout 120 $B/sparge-studio "${GUI_SAMPLE[@]}" --mouse 470,690 --screenshot "$OUT/studio_cuda.png" 2>&1 | tail -3
    timeout 120 $B/sparge-studio "${GUI_SAMPLE[@]}" --action profile=10 --action view=kernels:centre-bottom \
      --screenshot "$OUT/studio_kernels.png" 2>&1 | tail -3
    # The timings view after a warm-up by time (200 ms: the figures under sustained load).
    timeout 120 $B/sparge-studio "${GUI_SAMPLE[@]}" --action profile=10,200 --action view=timings \
      --screenshot "$OUT/studio_timings_warm.png" 2>&1 | tail -3
  fi
  if has frame; then
    echo "== GUI: frame time (32 heads x 32K in the grid, a 100-entry overview), slider latency 32 x 32K x D 128"
    use_nvidia_egl
    timeout 150 $B/sparge-studio-bench --heads 32 --tokens 32768 --dim 128 --changes 15 --frames 40 2>&1 | tail -16
  fi
} 2>&1 | tee "$LOG"
