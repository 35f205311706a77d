#!/usr/bin/env bash
# Device checks of the GPU path, in one go (about 5 minutes on one H200; must stay under 8):
#   1. configure and build Release with CUDA (-j from nproc; the Qt workbench is left out),
#   2. `ctest -L gpu --output-on-failure` (every GPU test; each skips with cudaGetDeviceCount's
#      answer where no device is present), the cuda executor's tests (cuda_executor_test:
#      parity of every sharding type and optimizer, a scaled criteo_kaggle session, OOM,
#      cuda_async) as their own row `cuda-executor`,
#   3. every GPU benchmark that was built (bench_gpu_kernels, bench_gpu_runtime),
#   4. a summary table, printed last.
# Without a device it says so after the build and exits 0. Exit 1 when a step failed.
#
# Usage: tests/gpu/run_device_checks.sh [BUILD_DIR]     (default: build-device)
# Environment: CMAKE_CUDA_ARCHITECTURES (default: the project's 80-real;90),
#              EMBEDSCOPE_TORCH_PYTHON (the python with torch for bench_gpu_kernels' peer),
#              EMBEDSCOPE_DEVICE_CHECKS_BUDGET_S (default 450: every step's time limit is cut to
#              what is left of it, so the whole script ends within about 8 minutes).
set -u -o pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-device}
JOBS=$(nproc)
START=$(date +%s)
rows=()    # "step|result|seconds|detail"
failed=0
log_dir="$BUILD/device-checks"

BUDGET=${EMBEDSCOPE_DEVICE_CHECKS_BUDGET_S:-450}  # every step together, seconds (under 8 minutes)

step() {  # step NAME LIMIT_S CMD... : runs CMD under min(LIMIT_S, what is left of BUDGET)
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s) rc
  local left=$(( BUDGET - (t0 - START) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 5 ]; then rows+=("$name|NOT RUN (budget)|0|"); failed=1; return 1; fi
  echo "=== $name (limit ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$log_dir/$name.log"
  rc=${PIPESTATUS[0]}
  local secs=$(( $(date +%s) - t0 )) result=ok detail=""
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then result=TIMEOUT; failed=1
  elif [ "$rc" -ne 0 ]; then result="FAILED (exit $rc)"; failed=1; fi
  case $name in
    ctest-gpu|cuda-executor) detail=$(grep -E "tests passed|tests failed" "$log_dir/$name.log" | tail -1)
               skipped=$(grep -c "(Skipped)" "$log_dir/$name.log"); detail="$detail; $skipped skipped" ;;
  esac
  rows+=("$name|$result|$secs|$detail")
  return $rc
}

summary() {
  echo
  echo "=== device checks summary ($(( $(date +%s) - START )) s in all)"
  printf '%-22s %-18s %6s  %s\n' step result secs detail
  for r in "${rows[@]}"; do IFS='|' read -r a b c d <<<"$r"; printf '%-22s %-18s %6s  %s\n' "$a" "$b" "$c" "$d"; done
  for j in "$log_dir"/bench_*.json; do
    [ -s "$j" ] || continue
    echo
    echo "--- $(basename "$j" .json)"
    python3 - "$j" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
skip = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads", "iterations",
        "real_time", "cpu_time", "time_unit", "family_index", "per_family_instance_index", "aggregate_name"}
for b in data.get("benchmarks", []):
    if b.get("error_occurred"):
        print(f"{b['name']}: skipped/error: {b.get('error_message', '')}")
        continue
    counters = ", ".join(f"{k}={v:.4g}" for k, v in b.items() if k not in skip and isinstance(v, (int, float)))
    print(f"{b['name']}: {counters}")
PY
  done
}

mkdir -p "$log_dir"
arch_flag=()
[ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ] && arch_flag=(-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES")
torch_flag=()
[ -n "${EMBEDSCOPE_TORCH_PYTHON:-}" ] && torch_flag=(-DEMBEDSCOPE_TORCH_PYTHON="$EMBEDSCOPE_TORCH_PYTHON")
if ! step configure 120 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DEMBEDSCOPE_WITH_CUDA=ON \
       -DEMBEDSCOPE_BUILD_UI=OFF "${arch_flag[@]}" "${torch_flag[@]}" \
   || ! step build 270 cmake --build "$BUILD" -j "$JOBS"; then
  summary
  exit 1
fi

if ! "$BUILD/tests/cuda_devices" >"$log_dir/devices.txt" 2>&1; then
  rows+=("devices|none|0|$(head -1 "$log_dir/devices.txt")")
  echo "$(head -1 "$log_dir/devices.txt"): built only; no device check ran."
  summary
  exit 0
fi
rows+=("devices|$(wc -l <"$log_dir/devices.txt") GPU(s)|0|$(head -1 "$log_dir/devices.txt" | cut -d: -f2-)")

# the cuda executor end to end (cuda_executor_test: parity, session, OOM, cuda_async) on its own row
executor_tests='CudaEqualsReference|CudaExecutor'
step ctest-gpu 150 ctest --test-dir "$BUILD" -L gpu -E "$executor_tests" --output-on-failure --timeout 120
step cuda-executor 150 ctest --test-dir "$BUILD" -L gpu -R "$executor_tests" --output-on-failure --timeout 120

for b in bench_gpu_kernels bench_gpu_runtime; do
  exe="$BUILD/bench/$b"
  if [ ! -x "$exe" ]; then rows+=("$b|not built|0|"); continue; fi
  step "$b" 100 "$exe" --benchmark_out="$log_dir/$b.json" --benchmark_out_format=json
done

summary
exit $failed
