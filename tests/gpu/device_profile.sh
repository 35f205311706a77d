#!/usr/bin/env bash
# Profiles of the GPU path on the GPU machine, from a pack that `run_device_checks.sh --prebuilt`
# unpacked and kept (EMBEDSCOPE_PREBUILT_KEEP=1; its summary's `unpack` row names the folder):
#   - Nsight Compute (`ncu --clock-control none`: the card's clocks as found) on the TBE forward
#     and backward kernels of bench_gpu_kernels' 1M-row shape: speed of light (DRAM / SM
#     throughput), memory workload, occupancy and launch figures;
#   - compute-sanitizer's memcheck (out-of-bounds and misaligned accesses, API errors) on
#     engine_gpu_test (every kernel test) and on one end-to-end cuda run of cuda_executor_test.
# Each writes OUT_DIR/NAME.txt; a tool that is missing or fails says so in its file and in the
# table printed last. Nothing here judges the figures: the note does.
#
#   tests/gpu/device_profile.sh PACK_DIR OUT_DIR
#
# PACK_DIR is the unpacked embedscope-device-pack folder. The CUDA libraries are the machine's
# (/usr/local/cuda*, python's nvidia wheels), as the prebuilt mode finds them. Exit 0 unless the
# arguments are wrong (2).
set -u -o pipefail
[ $# -eq 2 ] || { echo "usage: device_profile.sh PACK_DIR OUT_DIR" >&2; exit 2; }
P=$1 OUT=$2
[ -x "$P/bin/engine_gpu_test" ] || { echo "device_profile.sh: $P is not an unpacked device pack (no bin/engine_gpu_test)" >&2; exit 2; }
mkdir -p "$OUT" || exit 2

dirs=("$P/lib")
for d in /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64; do [ -d "$d" ] && dirs+=("$d"); done
if command -v python3 >/dev/null 2>&1; then
  while read -r d; do [ -n "$d" ] && dirs+=("$d"); done < <(timeout 20 python3 -c 'import glob, nvidia
for p in nvidia.__path__: print("\n".join(sorted(glob.glob(p + "/*/lib"))))' 2>/dev/null)
fi
LD_LIBRARY_PATH=$(IFS=:; echo "${dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH EMBEDSCOPE_TEST_DATA=$P/data
PATH=$PATH:/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer
for d in /opt/nvidia/nsight-compute/* /usr/local/cuda/nsight-compute*; do [ -x "$d/ncu" ] && PATH=$PATH:$d; done
rows=()

tool_step() {  # tool_step NAME LIMIT_S CMD... : CMD's output in OUT/NAME.txt, a row for the table
  local name=$1 limit=$2 t0=$(date +%s) rc; shift 2
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "$1 not found on this machine" >"$OUT/$name.txt"; rows+=("$name|not found|0|$1"); return; fi
  echo "=== $name (limit ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.txt" 2>&1
  rc=$?
  local result=ok
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && result=TIMEOUT
  [ $rc -ne 0 ] && [ "$result" = ok ] && result="exit $rc"
  rows+=("$name|$result|$(( $(date +%s) - t0 ))|$(grep -cE 'ERROR SUMMARY: [1-9]|========= (Invalid|Program hit)' "$OUT/$name.txt") error lines")
}

tool_step ncu_tbe 150 ncu --clock-control none --target-processes application-only \
  -k 'regex:tbe_(forward|update)_kernel' --launch-count 2 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  "$P/bin/bench_gpu_kernels" --benchmark_filter='gpu_(forward_sum|backward_rowwise_adagrad)/1000000'
# every kernel of one TBE backward (linearize, CUB's sort / run-length encode / scan, update):
# where its time goes
tool_step ncu_backward 150 ncu --clock-control none --target-processes application-only \
  -k 'regex:tbe_|cub' --launch-skip 40 --launch-count 8 --section SpeedOfLight --section LaunchStats \
  "$P/bin/bench_gpu_kernels" --benchmark_filter='gpu_backward_rowwise_adagrad/1000000'
tool_step memcheck_kernels 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$P/bin/engine_gpu_test" --gtest_color=no
# NCCL probes kernel images of other architectures and handles the API errors that gives (16
# cudaErrorNoKernelImageForDevice on an H200): API errors are not reported here, memory errors are
tool_step memcheck_executor 150 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$P/bin/cuda_executor_test" \
  --gtest_color=no --gtest_filter='AllTypes/CudaEqualsReference.ForwardAndTablesAfterThreeSteps/row_wise_rowwise_adagrad'

echo "=== device profile summary"
printf '%-20s %-10s %6s  %s\n' step result secs detail
for r in "${rows[@]}"; do IFS='|' read -r a b c d <<<"$r"; printf '%-20s %-10s %6s  %s\n' "$a" "$b" "$c" "$d"; done
grep -hE '^\s+(DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Compute \(SM\) Throughput|Registers Per Thread|L2 Hit Rate|L1/TEX Hit Rate)' "$OUT/ncu_tbe.txt" 2>/dev/null | head -40
grep -hE '^  [a-z_ ]*[a-zA-Z_:<>]+.*\(|^\s+(Duration|DRAM Throughput)' "$OUT/ncu_backward.txt" 2>/dev/null | cut -c1-110 | head -40
grep -hE 'ERROR SUMMARY|PASSED|FAILED' "$OUT"/memcheck_*.txt 2>/dev/null | head -10
exit 0
