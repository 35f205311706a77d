#!/usr/bin/env bash
# Device checks of the GPU path. Three modes:
#
#   --build [BUILD_DIR]           (the default; BUILD_DIR default build-device) on a machine that
#                                 has the packages: configure and build Release with CUDA, then
#                                 `ctest -L gpu`, the cuda executor's tests as their own row, every
#                                 GPU benchmark that was built, a summary table. Must stay under 8
#                                 minutes on one H200 (EMBEDSCOPE_DEVICE_CHECKS_BUDGET_S, default 450).
#   --pack OUT.tar.zst [BUILD_DIR]
#                                 here, after the normal build (BUILD_DIR default <repo>/build):
#                                 packs the GPU test executables (engine_gpu_test, cupti_test,
#                                 cuda_executor_test, gpu_runtime_test, cuda_devices), the GPU
#                                 benchmarks and the CLI where built, tests/data, the torch peer
#                                 script, this script, and every shared library they need that is
#                                 neither glibc nor CUDA/NVIDIA's (found with ldd). glibc's own
#                                 libraries and loader go in too, in glibc/, used only where the
#                                 device's glibc is older than the pack needs. CUDA libraries stay
#                                 the device's own. Refused (exit 1) above 32 MiB; prints the size.
#                                 EMBEDSCOPE_PACK_ZSTD_LEVEL (default 19) sets zstd's level.
#   --prebuilt PACK.tar.zst [SUMMARY_FILE]
#                                 on the GPU machine (no cmake, no ctest, no package registry, no
#                                 network): unpacks into a temp dir, finds the CUDA libraries the
#                                 pack needs (/usr/local/cuda*, CUDA_HOME, python's nvidia wheels,
#                                 ldconfig), runs the gtest executables directly with the filters of
#                                 the build mode's rows (resuming after a crashed test), then the
#                                 benchmarks, within a hard budget of 5 minutes for everything
#                                 (EMBEDSCOPE_DEVICE_CHECKS_BUDGET_S, default 300), and writes the
#                                 summary table to SUMMARY_FILE (default device-checks-summary.txt
#                                 in the current directory; logs and benchmark JSON beside it in
#                                 SUMMARY_FILE's name with .logs) and to stdout.
#                                 EMBEDSCOPE_DEVICE_CHECKS_ONLY=REGEX runs only the rows whose
#                                 name matches (grep -E), e.g. 'engine_gpu_test|bench_gpu_kernels'
#                                 to rerun what failed; the others read "not selected".
#                                 EMBEDSCOPE_PREBUILT_GLIBC=auto|system|pack picks whose glibc runs
#                                 the executables (auto: the pack's only when the system's is older
#                                 than the pack needs). EMBEDSCOPE_PREBUILT_KEEP=1 keeps the temp dir.
#
# Without a device every check still runs and the GPU tests skip with cudaGetDeviceCount's answer
# (the build mode stops after the build instead). Exit 0 when nothing failed (skips are not
# failures), 1 when a check failed or ran out of time, 2 for bad arguments or a pack that cannot
# be made or opened.
# Environment (every mode): EMBEDSCOPE_TORCH_PYTHON (the python with torch for bench_gpu_kernels'
# peer); build mode also CMAKE_CUDA_ARCHITECTURES (default: the project's 80-real;90).
set -u -o pipefail
START=$(date +%s)
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
REPO=$(cd "$(dirname "$0")/../.." && pwd)
rows=()    # "step|result|seconds|detail"
failed=0
PACK_LIMIT_BYTES=$((32 * 1024 * 1024))
PACK_ROOT=embedscope-device-pack

die() { echo "run_device_checks.sh: $*" >&2; exit 2; }
abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

# what is left of BUDGET, less a reserve for the summary; prints the limit for a step asking LIMIT_S
cut_limit() {
  local limit=$1 left=$(( BUDGET - ($(date +%s) - START) - 15 ))
  [ "$left" -lt "$limit" ] && limit=$left
  echo "$limit"
  [ "$limit" -gt 5 ]
}

step() {  # step NAME LIMIT_S CMD... : runs CMD under min(LIMIT_S, what is left of BUDGET)
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s) rc
  if ! limit=$(cut_limit "$limit"); then rows+=("$name|NOT RUN (budget)|0|"); failed=1; return 1; fi
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

bench_figures() {  # bench_figures JSON : one line per benchmark, its counters or its error
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$1" <<'PY'
import json, re, sys
try:
    data = json.load(open(sys.argv[1]))
except ValueError:  # cut off by the step's time limit: the console lines of the benchmarks that ended
    log = re.sub(r"\.json$", ".log", sys.argv[1])
    for line in open(log, errors="replace"):
        m = re.match(r"^(\S+/manual_time)\s+.*?\d+\s+((?:\w+=\S+\s*)+)$", line.rstrip())
        if m:
            print(f"{m.group(1)}: {', '.join(m.group(2).split())} (from the log: the JSON was cut off)")
    sys.exit(0)
skip = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads", "iterations",
        "real_time", "cpu_time", "time_unit", "family_index", "per_family_instance_index", "aggregate_name"}
for b in data.get("benchmarks", []):
    if b.get("error_occurred"):
        print(f"{b['name']}: skipped/error: {b.get('error_message', '')}")
        continue
    counters = ", ".join(f"{k}={v:.4g}" for k, v in b.items() if k not in skip and isinstance(v, (int, float)))
    label = f" ({b['label']})" if b.get("label") else ""
    print(f"{b['name']}: {counters}{label}")
PY
  else  # no python: the names and errors as the JSON has them
    grep -E '"(name|error_message)":' "$1" | sed 's/^ *//'
  fi
}

summary() {  # the table, then each benchmark's figures (callers print a blank line first)
  echo "=== device checks summary ($(( $(date +%s) - START )) s in all)"
  [ -n "${summary_head:-}" ] && printf '%s\n' "$summary_head"
  printf '%-30s %-18s %6s  %s\n' step result secs detail
  for r in "${rows[@]}"; do IFS='|' read -r a b c d <<<"$r"; printf '%-30s %-18s %6s  %s\n' "$a" "$b" "$c" "$d"; done
  for j in "$log_dir"/bench_*.json; do
    [ -s "$j" ] || continue
    echo
    echo "--- $(basename "$j" .json)"
    bench_figures "$j"
  done
}

# ---------------------------------------------------------------------------------------------
# --build: configure, build, ctest (today's behaviour)
build_mode() {
  cd "$REPO" || exit 2
  BUILD=${1:-build-device}
  JOBS=$(nproc)
  log_dir="$BUILD/device-checks"
  BUDGET=${EMBEDSCOPE_DEVICE_CHECKS_BUDGET_S:-450}  # every step together, seconds (under 8 minutes)
  mkdir -p "$log_dir"
  local arch_flag=() torch_flag=()
  [ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ] && arch_flag=(-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES")
  [ -n "${EMBEDSCOPE_TORCH_PYTHON:-}" ] && torch_flag=(-DEMBEDSCOPE_TORCH_PYTHON="$EMBEDSCOPE_TORCH_PYTHON")
  if ! step configure 120 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DEMBEDSCOPE_WITH_CUDA=ON \
         -DEMBEDSCOPE_BUILD_UI=OFF "${arch_flag[@]}" "${torch_flag[@]}" \
     || ! step build 270 cmake --build "$BUILD" -j "$JOBS"; then
    echo; summary
    exit 1
  fi
  if ! "$BUILD/tests/cuda_devices" >"$log_dir/devices.txt" 2>&1; then
    rows+=("devices|none|0|$(head -1 "$log_dir/devices.txt")")
    echo "$(head -1 "$log_dir/devices.txt"): built only; no device check ran."
    echo; summary
    exit 0
  fi
  rows+=("devices|$(wc -l <"$log_dir/devices.txt") GPU(s)|0|$(head -1 "$log_dir/devices.txt" | cut -d: -f2-)")
  # the cuda executor end to end (cuda_executor_test: parity, session, OOM, cuda_async) on its own row
  local executor_tests='CudaEqualsReference|CudaExecutor'
  step ctest-gpu 150 ctest --test-dir "$BUILD" -L gpu -E "$executor_tests" --output-on-failure --timeout 120
  step cuda-executor 150 ctest --test-dir "$BUILD" -L gpu -R "$executor_tests" --output-on-failure --timeout 120
  for b in bench_gpu_kernels bench_gpu_runtime; do
    exe="$BUILD/bench/$b"
    if [ ! -x "$exe" ]; then rows+=("$b|not built|0|"); continue; fi
    step "$b" 100 "$exe" --benchmark_out="$log_dir/$b.json" --benchmark_out_format=json
  done
  echo; summary
  exit $failed
}

# The prebuilt rows: ROW|EXECUTABLE|GTEST_FILTER|LIMIT_S. The build mode's `ctest -L gpu -E
# 'CudaEqualsReference|CudaExecutor'` is the first three rows together, its cuda-executor row
# (-R of the same) the fourth; cupti_test (label profiler_backend) runs without a device.
PREBUILT_TESTS=(
  "engine_gpu_test|engine_gpu_test|-*CudaEqualsReference*:*CudaExecutor*|60"
  "gpu_runtime_test|gpu_runtime_test|-*CudaEqualsReference*:*CudaExecutor*|60"
  "cuda_executor_test|cuda_executor_test|-*CudaEqualsReference*:*CudaExecutor*|60"
  "cuda-executor|cuda_executor_test|*CudaEqualsReference*:*CudaExecutor*|120"
  "cupti_test|cupti_test|*|30"
)
PREBUILT_BENCHES=("bench_gpu_kernels|180" "bench_gpu_runtime|60")
REQUIRED_EXES=(tests/engine_gpu_test tests/cupti_test tests/cuda_executor_test tests/gpu_runtime_test tests/cuda_devices)
OPTIONAL_EXES=(bench/bench_gpu_kernels bench/bench_gpu_runtime app/cli/embedscope)
# sonames that stay the device's own, and glibc's (packed apart, in glibc/)
CUDA_LIB_RE='^lib(cuda|cudart|cupti|nccl|nv|cublas|cufft|curand|cusparse|cusolver|cudnn|cufile)'
GLIBC_LIB_RE='^(libc|libm|libmvec|libpthread|libdl|librt|libutil|libresolv|libanl|libnsl|libthread_db|libBrokenLocale)\.so\.[0-9]+$'

glibc_needed() {  # glibc_needed FILE... : the highest GLIBC_x.y symbol version the files need
  for f in "$@"; do objdump -T "$f" 2>/dev/null; done | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1
}

# ---------------------------------------------------------------------------------------------
# --pack OUT.tar.zst [BUILD_DIR]
pack_mode() {
  [ $# -ge 1 ] || die "--pack needs OUT.tar.zst (usage: --pack OUT.tar.zst [BUILD_DIR])"
  local out build
  out=$(abspath "$1")
  build=$(abspath "${2:-$REPO/build}")
  case $out in *.tar.zst) ;; *) die "--pack: $1 should end in .tar.zst" ;; esac
  [ -d "$build" ] || die "--pack: build dir $build does not exist (configure and build first, docs/gpu.md 'Device checks')"
  command -v zstd >/dev/null || die "--pack: zstd not found (apt-get install zstd)"
  command -v objdump >/dev/null || die "--pack: objdump not found (binutils)"
  local missing=() e
  for e in "${REQUIRED_EXES[@]}"; do [ -x "$build/$e" ] || missing+=("$(basename "$e")"); done
  [ ${#missing[@]} -eq 0 ] || die "--pack: $build lacks ${missing[*]} (a CUDA build: cmake --build $build --target ${missing[*]})"
  local stage
  stage=$(mktemp -d "${TMPDIR:-/tmp}/embedscope-pack.XXXXXX") || die "--pack: mktemp failed"
  trap 'rm -rf "$stage"' EXIT
  local root="$stage/$PACK_ROOT"
  mkdir -p "$root/bin" "$root/lib" "$root/glibc" "$root/bench"
  local exes=()
  for e in "${REQUIRED_EXES[@]}" "${OPTIONAL_EXES[@]}"; do
    [ -x "$build/$e" ] || { echo "pack: $e not built; left out"; continue; }
    cp "$build/$e" "$root/bin/" && exes+=("$root/bin/$(basename "$e")")
  done
  # symbol tables out (strip --strip-unneeded: the CUDA fatbins, .rodata and the dynamic symbols stay;
  # nothing here prints a symbolised stack): 67.1 -> 58.6 MB of executables, 20.9 -> 19.6 MB
  # compressed at zstd -9 (session 50, when the pack test's pack reached 32.04 MiB)
  if command -v strip >/dev/null 2>&1; then strip --strip-unneeded "${exes[@]}"; fi
  cp -r "$REPO/tests/data" "$root/data"
  cp "$REPO/bench/torch_embedding_bag.py" "$root/bench/"
  cp "$SELF" "$root/run_device_checks.sh"
  cp "$REPO/tests/gpu/device_profile.sh" "$root/device_profile.sh"
  # every library ldd resolves for the executables (ldd lists the whole closure)
  local name arrow path rest device_libs=() packed=0 not_found=()
  while read -r name arrow path rest; do
    [ "$arrow" = "=>" ] || continue           # linux-vdso, the loader's own line
    [ "$path" = "not" ] && { not_found+=("$name"); continue; }
    if [[ $name =~ $CUDA_LIB_RE ]]; then device_libs+=("$name")
    elif [[ $name =~ $GLIBC_LIB_RE ]]; then cp -L "$path" "$root/glibc/$name"
    else cp -L "$path" "$root/lib/$name"; packed=$((packed + 1)); fi  # one line per soname (sort -u)
  done < <(for x in "${exes[@]}"; do ldd "$x"; done | awk '{print $1, $2, $3}' | sort -u)
  [ ${#not_found[@]} -eq 0 ] || die "--pack: ldd finds no ${not_found[*]} here: the build cannot run here either"
  # cuBLAS is opened at run time (dlopen in engine/kernels/cuda/dense.cu), so ldd does not list it:
  # the soname the executables name, and its libcublasLt beside it, are device libraries too
  local blas
  for blas in $(grep -aoh 'libcublas\.so\.[0-9]\+' "${exes[@]}" | sort -u); do
    device_libs+=("$blas" "${blas/libcublas/libcublasLt}")
  done
  local interp
  interp=$(readelf -l "${exes[0]}" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  cp -L "$interp" "$root/glibc/$(basename "$interp")"
  mapfile -t device_libs < <(printf '%s\n' "${device_libs[@]}" | sort -u)
  local commit
  commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$REPO" diff --quiet HEAD 2>/dev/null || commit="$commit+uncommitted"
  {
    echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) from $REPO at $commit, build $build"
    echo "glibc_required: $(glibc_needed "$root"/bin/* "$root"/lib/*)"
    echo "glibc_packed: $(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
    echo "interpreter: $(basename "$interp")"
    echo "device_libs: ${device_libs[*]}"
    echo "executables: $(cd "$root/bin" && echo *)"
  } >"$root/MANIFEST"
  local level=${EMBEDSCOPE_PACK_ZSTD_LEVEL:-19}
  mkdir -p "$(dirname "$out")"
  # --long=27 (a 128 MiB window, what zstd -d and python's zstd modules accept by default): the six
  # executables carry the same CUDA fatbins, which a 128 MiB window finds across the 115 MiB tar.
  # Measured 2026-12-06: zstd -9 32.2 -> 24.7 MiB (1.5 -> 1.2 s); -19 27.0 -> 16.9 MiB.
  tar -C "$stage" -cf - "$PACK_ROOT" | zstd -q -f "-$level" --long=27 -T0 -o "$out" || die "--pack: writing $out failed"
  local size
  size=$(stat -c %s "$out")
  echo "pack: $out: $size bytes ($(awk -v s="$size" 'BEGIN{printf "%.1f", s/1048576}') MiB, zstd -$level;" \
       "$(du -sb "$root" | awk '{printf "%.1f", $1/1048576}') MiB unpacked): ${#exes[@]} executables, $packed libraries," \
       "glibc $(sed -n 's/^glibc_required: //p' "$root/MANIFEST") needed; the device's own: ${device_libs[*]}"
  if [ "$size" -gt "$PACK_LIMIT_BYTES" ]; then
    echo "pack: $out is over the 32 MiB limit ($size bytes)" >&2
    exit 1
  fi
  exit 0
}

# ---------------------------------------------------------------------------------------------
# --prebuilt PACK.tar.zst [SUMMARY_FILE]
unpack() {  # unpack PACK DIR : tar with zstd, else python's zstd (3.14's compression.zstd, zstandard, pyarrow)
  if command -v zstd >/dev/null 2>&1; then
    zstd -dc "$1" | tar -C "$2" -xf - && return 0
    return 1
  fi
  command -v python3 >/dev/null 2>&1 || { echo "no zstd and no python3 to unpack with"; return 1; }
  python3 - "$1" "$2" <<'PY'
import sys, tarfile
src, dst = sys.argv[1], sys.argv[2]
def stream():
    try:
        from compression import zstd
        return zstd.open(src, "rb")
    except ImportError:
        pass
    try:
        import zstandard
        return zstandard.ZstdDecompressor().stream_reader(open(src, "rb"))
    except ImportError:
        pass
    import pyarrow
    return pyarrow.CompressedInputStream(pyarrow.OSFile(src), "zstd")
with tarfile.open(fileobj=stream(), mode="r|") as t:
    t.extractall(dst)
PY
}

find_device_lib() {  # find_device_lib SONAME : the directory that holds it, from the usual places
  local d
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-*; do
    [ -n "$d" ] || continue
    for sub in lib64 lib targets/x86_64-linux/lib extras/CUPTI/lib64; do
      [ -e "$d/$sub/$1" ] && { echo "$d/$sub"; return 0; }
    done
  done
  for d in "${python_nvidia[@]}"; do [ -e "$d/$1" ] && { echo "$d"; return 0; }; done
  d=$(ldconfig -p 2>/dev/null | awk -v l="$1" '$1==l{print $NF; exit}')
  [ -n "$d" ] && { dirname "$d"; return 0; }
  return 1
}

run_packed() {  # run_packed LIMIT_S EXE ARGS... : the executable with the pack's libraries
  local limit=$1 exe=$2; shift 2
  if [ "$glibc_mode" = pack ]; then
    timeout --kill-after=5 "$limit" "$P/glibc/$interpreter" --library-path "$libpath_pack_glibc" "$exe" "$@"
  else
    LD_LIBRARY_PATH=$libpath timeout --kill-after=5 "$limit" "$exe" "$@"
  fi
}

gtest_count() {  # gtest_count LOG TAG : tests that ended with [ TAG ] (their own lines, with the time)
  grep -cE "^\[ *$1 *\] .*\([0-9]+ ms\)$" "$2"
}

run_gtest() {  # run_gtest ROW EXE FILTER LIMIT_S : a gtest executable directly; resumes after a crash
  local name=$1 exe=$P/bin/$2 filter=$3 limit=$4
  local t0=$(date +%s) log="$log_dir/$name.log" rc=0 crashes=() done_tests="" attempt=0
  if [ ! -x "$exe" ]; then rows+=("$name|FAILED|0|$2 is not in the pack"); failed=1; return; fi
  if ! limit=$(cut_limit "$limit"); then rows+=("$name|NOT RUN (budget)|0|"); failed=1; return; fi
  local deadline=$((t0 + limit))
  : >"$log"
  while [ $attempt -lt 10 ]; do
    attempt=$((attempt + 1))
    local f=$filter left=$((deadline - $(date +%s))) part="$log.$attempt"
    if [ -n "$done_tests" ]; then case $f in *-*) f="$f:$done_tests" ;; *) f="$f-$done_tests" ;; esac; fi
    [ $left -gt 2 ] || { rc=124; break; }
    echo "=== $name (limit ${left}s): $2 --gtest_filter='$f'"
    run_packed "$left" "$exe" --gtest_filter="$f" --gtest_color=no 2>&1 | tee "$part"
    rc=${PIPESTATUS[0]}
    cat "$part" >>"$log"
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && break
    grep -qE '^\[==========\] [0-9]+ tests? from .* ran\.' "$part" && break  # gtest finished
    # a crash: the test that started last and never ended, and every test that ended, are done
    local crashed
    crashed=$(grep -E '^\[ RUN      \] ' "$part" | tail -1 | sed 's/^\[ RUN      \] //')
    [ -n "$crashed" ] || break  # died before any test (the loader, say): nothing to resume
    grep -qE "^\[ *(OK|FAILED|SKIPPED) *\] $crashed[ ,]" "$part" && break
    crashes+=("$crashed (exit $rc)")
    local ended
    ended=$(grep -E '^\[ *(OK|FAILED|SKIPPED) *\] [^ ]+.* \([0-9]+ ms\)$' "$part" | sed -E 's/^\[[^]]*\] ([^ ,]+).*/\1/' | paste -sd: -)
    done_tests="${done_tests:+$done_tests:}${ended:+$ended:}$crashed"
  done
  local secs=$(( $(date +%s) - t0 ))
  local passed failed_n skipped reason result detail
  passed=$(gtest_count OK "$log"); failed_n=$(( $(gtest_count FAILED "$log") + ${#crashes[@]} ))
  skipped=$(gtest_count SKIPPED "$log")
  reason=$(grep -A1 -E ': Skipped$' "$log" | grep -vE ': Skipped$|^--$|^\[' | sort | uniq -c | sort -rn | head -1 | sed -E 's/^ *[0-9]+ //')
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then result=TIMEOUT; failed=1
  elif [ ${#crashes[@]} -gt 0 ]; then result="FAILED (crash)"; failed=1
  elif [ $failed_n -gt 0 ] || [ $rc -ne 0 ]; then result="FAILED (exit $rc)"; failed=1
  elif [ $passed -eq 0 ] && [ $skipped -gt 0 ]; then result=skipped
  elif [ $passed -eq 0 ] && grep -qE '^\[==========\] 0 tests from 0 test suites ran\.' "$log"; then
    result=none
  elif [ $passed -eq 0 ]; then result="FAILED (no test)"; failed=1
  else result=passed; fi
  detail="$passed passed, $failed_n failed, $skipped skipped"
  [ $failed_n -gt 0 ] && detail="$detail; failed: $(grep -E '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$log" | sed -E 's/^\[  FAILED  \] ([^ ,]+).*/\1/' | head -3 | paste -sd' ' -)"
  [ ${#crashes[@]} -gt 0 ] && detail="$detail; crashed: ${crashes[*]}"
  if [ "$result" = none ]; then detail="no test matches the filter $filter"
  elif [ $passed -eq 0 ] && [ $failed_n -eq 0 ] && [ $skipped -eq 0 ]; then detail="$detail; $(grep -vE '^===|^Running main' "$log" | grep . | tail -1)"; fi
  [ -n "$reason" ] && detail="$detail; skipped: $reason"
  rows+=("$name|$result|$secs|$detail")
}

run_bench() {  # run_bench NAME LIMIT_S : a packed Google Benchmark executable, JSON beside the logs
  local name=$1 limit=$2 exe=$P/bin/$1 t0=$(date +%s) rc
  if [ ! -x "$exe" ]; then rows+=("$name|not built|0|left out of the pack"); return; fi
  if ! limit=$(cut_limit "$limit"); then rows+=("$name|NOT RUN (budget)|0|"); failed=1; return; fi
  echo "=== $name (limit ${limit}s)"
  run_packed "$limit" "$exe" --benchmark_out="$log_dir/$name.json" --benchmark_out_format=json 2>&1 | tee "$log_dir/$name.log"
  rc=${PIPESTATUS[0]}
  local secs=$(( $(date +%s) - t0 )) n=0 errors=0 msg=""
  if [ -s "$log_dir/$name.json" ]; then
    n=$(grep -c '"run_name":' "$log_dir/$name.json"); errors=$(grep -c '"error_occurred": true' "$log_dir/$name.json")
    msg=$(grep -m1 '"error_message":' "$log_dir/$name.json" | sed -E 's/.*"error_message": "(.*)",?$/\1/')
  fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then rows+=("$name|TIMEOUT|$secs|$n benchmarks written"); failed=1
  elif [ "$rc" -ne 0 ]; then rows+=("$name|FAILED (exit $rc)|$secs|$(grep -v '^===' "$log_dir/$name.log" | tail -1)"); failed=1
  elif [ "$n" -eq 0 ]; then rows+=("$name|skipped|$secs|no figures: $(grep -v '^===' "$log_dir/$name.log" | grep . | tail -1)")
  elif [ "$errors" -eq "$n" ]; then rows+=("$name|skipped|$secs|$n benchmarks, all: $msg")
  elif [ "$errors" -gt 0 ]; then rows+=("$name|ran|$secs|$n benchmarks, $errors skipped (first: $msg); figures below")
  else rows+=("$name|ran|$secs|$n benchmarks; figures below"); fi
}

# The workloads end to end through the packed CLI: ROW|LIMIT_S|EXPECTED_EXIT|ENV|ARGS of
# `embedscope` (LOG is the logs folder; ENV `-` or one NAME=VALUE set for the command). Their
# sessions stay beside the logs; the detail is how the run ended, its throughput, step time and
# the overlap `stats` reports (stream level on a cuda session: GPU comm vs compute kernels and
# copies); the -sparse_dist and -semi_sync rows run the 4-rank row under those pipelines (the
# next batch's input dist, and with semi_sync its lookup and output dist, under the dense part),
# to compare with the base row. The fault row injects a CUDA launch failure into rank 1's third
# lookup (exec/device/fault_injection.h): the run must end `crashed` (exit 1) naming the rank and
# the call, with a readable session.
PREBUILT_WORKLOADS=(
  "criteo-cuda-4ranks|90|0|-|run --backend cuda --preset criteo_kaggle --devices 4 --json --force-overwrite -o LOG/criteo_cuda4.db"
  "criteo-cuda-4ranks-sparse_dist|60|0|-|run --backend cuda --preset criteo_kaggle --devices 4 --pipeline sparse_dist --json --force-overwrite -o LOG/criteo_cuda4_sparse_dist.db"
  "criteo-cuda-4ranks-semi_sync|60|0|-|run --backend cuda --preset criteo_kaggle --devices 4 --pipeline semi_sync --json --force-overwrite -o LOG/criteo_cuda4_semi_sync.db"
  "criteo-cuda-1rank|60|0|-|run --backend cuda --preset criteo_kaggle --devices 1 --json --force-overwrite -o LOG/criteo_cuda1.db"
  "criteo-cpu-4ranks|60|0|-|run --backend cpu --preset criteo_kaggle --devices 4 --json --force-overwrite -o LOG/criteo_cpu4.db"
  "launch-cuda-1proc|60|0|-|launch -n 1 run --backend cuda --preset tiny --force-overwrite -o LOG/launch_cuda1.db"
  "fault-cuda-2ranks|60|1|EMBEDSCOPE_INJECT_DEVICE_FAULT=1:lookup:3|run --backend cuda --preset tiny --devices 2 --force-overwrite -o LOG/fault_cuda2.db"
)

run_workload() {  # run_workload ROW LIMIT_S EXPECTED_EXIT ENV ARGS : the packed CLI, then `stats` on its session
  local name=$1 limit=$2 expect=$3 env=$4 args=${5//LOG/$log_dir} exe=$P/bin/embedscope t0=$(date +%s) rc db
  if [ ! -x "$exe" ]; then rows+=("$name|not built|0|embedscope is not in the pack"); return; fi
  if [ "$have_device" != 1 ] && [[ $args == *"--backend cuda"* ]]; then
    rows+=("$name|skipped|0|no device (the devices row)"); return; fi
  if ! limit=$(cut_limit "$limit"); then rows+=("$name|NOT RUN (budget)|0|"); failed=1; return; fi
  local env_args=()
  [ "$env" != - ] && env_args=("$env")
  echo "=== $name (limit ${limit}s): ${env_args[*]} embedscope $args"
  # shellcheck disable=SC2086  # ARGS are words by design (no spaces inside one)
  (cd "$log_dir" && { [ ${#env_args[@]} -eq 0 ] || export "${env_args[@]}"; } && run_packed "$limit" "$exe" $args) \
    >"$log_dir/$name.log" 2>&1
  rc=$?
  tail -5 "$log_dir/$name.log"
  db=$(printf '%s\n' $args | grep -E '\.db$' | tail -1)
  local secs=$(( $(date +%s) - t0 )) detail="" result=ok
  if [ -f "$db" ]; then
    run_packed 60 "$exe" stats "$db" >"$log_dir/$name.stats.txt" 2>&1
    detail=$(grep -E '^(session|step time +mean|throughput|overlap) ' "$log_dir/$name.stats.txt" | sed -E 's/ +/ /g; s/\(thread level.*\)|\(stream level.*\)//' | cut -c1-110 | paste -sd';' -)
  fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then result=TIMEOUT; failed=1
  elif [ "$rc" -ne "$expect" ]; then result="FAILED (exit $rc)"; failed=1
  elif [ "$rc" -ne 0 ]; then result="ok (exit $rc)"; fi
  if [ "$rc" -ne 0 ]; then
    detail="$({ grep -m1 '^error' "$log_dir/$name.log" || grep -v '^===' "$log_dir/$name.log" | grep . | tail -1; } | cut -c1-200); $detail"
  fi
  rows+=("$name|$result|$secs|$detail")
}

selected() {  # selected ROW : true unless EMBEDSCOPE_DEVICE_CHECKS_ONLY is set and ROW does not match it
  [ -z "${EMBEDSCOPE_DEVICE_CHECKS_ONLY:-}" ] && return 0
  grep -qE -- "$EMBEDSCOPE_DEVICE_CHECKS_ONLY" <<<"$1" && return 0
  rows+=("$1|not selected|0|EMBEDSCOPE_DEVICE_CHECKS_ONLY='$EMBEDSCOPE_DEVICE_CHECKS_ONLY'")
  return 1
}

prebuilt_mode() {
  [ $# -ge 1 ] || die "--prebuilt needs PACK.tar.zst (usage: --prebuilt PACK.tar.zst [SUMMARY_FILE])"
  local pack summary_file
  pack=$(abspath "$1")
  summary_file=$(abspath "${2:-device-checks-summary.txt}")
  [ -f "$pack" ] || die "--prebuilt: $pack does not exist (make it with --pack, docs/gpu.md 'Device checks')"
  # a filter grep cannot read would select nothing and read as a run of skips
  if [ -n "${EMBEDSCOPE_DEVICE_CHECKS_ONLY:-}" ]; then
    grep -qE -- "$EMBEDSCOPE_DEVICE_CHECKS_ONLY" </dev/null; [ $? -eq 2 ] &&
      die "EMBEDSCOPE_DEVICE_CHECKS_ONLY='$EMBEDSCOPE_DEVICE_CHECKS_ONLY' is not an extended regular expression (grep -E)"
  fi
  BUDGET=${EMBEDSCOPE_DEVICE_CHECKS_BUDGET_S:-300}
  log_dir="${summary_file%.*}.logs"
  rm -rf "$log_dir"; mkdir -p "$log_dir" || die "--prebuilt: cannot make $log_dir"
  TMP_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/embedscope-prebuilt.XXXXXX") || die "--prebuilt: mktemp failed"
  [ "${EMBEDSCOPE_PREBUILT_KEEP:-0}" = 1 ] || trap 'rm -rf "$TMP_ROOT"' EXIT
  local t0=$(date +%s)
  if ! timeout 60 bash -c "$(declare -f unpack); unpack '$pack' '$TMP_ROOT'" >"$log_dir/unpack.log" 2>&1 \
     || [ ! -f "$TMP_ROOT/$PACK_ROOT/MANIFEST" ]; then
    echo "--prebuilt: cannot unpack $pack: $(tail -1 "$log_dir/unpack.log")" >&2
    exit 2
  fi
  P=$TMP_ROOT/$PACK_ROOT
  rows+=("unpack|ok|$(( $(date +%s) - t0 ))|$(du -sb "$P" | awk '{printf "%.1f MiB", $1/1048576}') in $TMP_ROOT")
  summary_head="pack: $pack ($(sed -n 's/^made: //p' "$P/MANIFEST"))"

  # the build tree's paths, as the tests see them, point into the pack (tests/support/build_paths.cpp)
  export EMBEDSCOPE_TEST_DATA=$P/data EMBEDSCOPE_CLI=$P/bin/embedscope EMBEDSCOPE_UI=$P/bin/embedscope-ui \
         EMBEDSCOPE_SOURCE_DIR=$P EMBEDSCOPE_SHARED_DATA=$P/shared-data
  export EMBEDSCOPE_TORCH_PEER=$P/bench/torch_embedding_bag.py
  # the torch peer is the device's python: it gets the machine's LD_LIBRARY_PATH, not the pack's
  ORIGINAL_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
  {
    printf '#!/bin/sh\n'
    if [ -n "$ORIGINAL_LD_LIBRARY_PATH" ]; then printf "export LD_LIBRARY_PATH='%s'\n" "$ORIGINAL_LD_LIBRARY_PATH"
    else printf 'unset LD_LIBRARY_PATH\n'; fi
    printf "exec '%s' \"\$@\"\n" "${EMBEDSCOPE_TORCH_PYTHON:-$(command -v python3 || echo /usr/bin/python3)}"
  } >"$P/bin/torch-python"
  chmod +x "$P/bin/torch-python"
  export EMBEDSCOPE_TORCH_PYTHON=$P/bin/torch-python

  # glibc: the system's unless it is older than the pack needs
  local need have
  need=$(sed -n 's/^glibc_required: //p' "$P/MANIFEST"); interpreter=$(sed -n 's/^interpreter: //p' "$P/MANIFEST")
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  glibc_mode=${EMBEDSCOPE_PREBUILT_GLIBC:-auto}
  if [ "$glibc_mode" = auto ]; then
    if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" = "$need" ]; then glibc_mode=system
    else glibc_mode=pack; fi
  fi
  case $glibc_mode in
    system) rows+=("glibc|system|0|the system's $have (the pack needs $need)") ;;
    pack) rows+=("glibc|pack's|0|the pack's $(sed -n 's/^glibc_packed: //p' "$P/MANIFEST") through its loader (system: ${have:-unknown}; the pack needs $need)") ;;
    *) die "EMBEDSCOPE_PREBUILT_GLIBC is '$glibc_mode'; auto, system or pack" ;;
  esac

  # the CUDA libraries: the device's own
  python_nvidia=()
  if command -v python3 >/dev/null 2>&1; then
    mapfile -t python_nvidia < <(timeout 20 python3 -c 'import glob, nvidia
for p in nvidia.__path__: print("\n".join(sorted(glob.glob(p + "/*/lib"))))' 2>/dev/null)
  fi
  local lib dir cuda_dirs=() found=() missing=()
  for lib in $(sed -n 's/^device_libs: //p' "$P/MANIFEST"); do
    if dir=$(find_device_lib "$lib"); then
      found+=("$lib ($dir)")
      [[ " ${cuda_dirs[*]} " == *" $dir "* ]] || cuda_dirs+=("$dir")
    else missing+=("$lib"); fi
  done
  local extra=""  # no empty element: LD_LIBRARY_PATH would read it as the current directory
  [ ${#cuda_dirs[@]} -gt 0 ] && extra=$(printf ':%s' "${cuda_dirs[@]}")
  # the machine's own LD_LIBRARY_PATH last: container images find the driver's libcuda through it
  libpath=$P/lib$extra${ORIGINAL_LD_LIBRARY_PATH:+:$ORIGINAL_LD_LIBRARY_PATH}
  libpath_pack_glibc=$P/lib:$P/glibc$extra${ORIGINAL_LD_LIBRARY_PATH:+:$ORIGINAL_LD_LIBRARY_PATH}
  # every library the executables need resolved, the pack's from the pack
  local unresolved=() strays=() line
  for exe in "$P"/bin/*; do
    [ "$(head -c 4 "$exe" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    while read -r line; do
      case $line in
        *"=> not found"*) unresolved+=("${line%% *}") ;;
        *" => $P/"*) ;;
        *" => "*) name=${line%% *}
          # glibc's from the system only when the system's runs them
          [[ $name =~ $CUDA_LIB_RE ]] || { [ "$glibc_mode" = system ] && [[ $name =~ $GLIBC_LIB_RE ]]; } \
            || strays+=("$name") ;;
      esac
    done < <(if [ "$glibc_mode" = pack ]; then "$P/glibc/$interpreter" --list --library-path "$libpath_pack_glibc" "$exe"
             else LD_LIBRARY_PATH=$libpath ldd "$exe"; fi 2>&1)
  done
  mapfile -t unresolved < <(printf '%s\n' "${unresolved[@]}" | sort -u | grep .)
  mapfile -t strays < <(printf '%s\n' "${strays[@]}" | sort -u | grep .)
  local n_packed
  n_packed=$(find "$P/lib" -maxdepth 1 -type f | wc -l)
  if [ ${#unresolved[@]} -gt 0 ] || [ ${#missing[@]} -gt 0 ]; then
    rows+=("libraries|MISSING|0|not found: $(printf '%s\n' "${missing[@]}" "${unresolved[@]}" | sort -u | grep . | paste -sd' ' -) (set CUDA_HOME or LD_LIBRARY_PATH); found: ${found[*]}")
    failed=1
  elif [ ${#strays[@]} -gt 0 ]; then
    rows+=("libraries|FAILED|0|not from the pack: ${strays[*]}"); failed=1
  else
    rows+=("libraries|ok|0|$n_packed from the pack; the device's: ${found[*]}")
  fi

  # the devices, then every check (they skip with cudaGetDeviceCount's answer where none is visible)
  local out
  out=$(run_packed 30 "$P/bin/cuda_devices" 2>&1); local rc=$?
  printf '%s\n' "$out" >"$log_dir/devices.txt"
  have_device=0; [ $rc -eq 0 ] && have_device=1
  if [ $rc -eq 0 ]; then rows+=("devices|$(printf '%s\n' "$out" | grep -c '^device ') GPU(s)|0|$(printf '%s\n' "$out" | head -1 | cut -d: -f2-)")
  elif [ $rc -eq 3 ]; then rows+=("devices|none|0|$(printf '%s\n' "$out" | head -1); every GPU check skips")
  else rows+=("devices|FAILED (exit $rc)|0|$(printf '%s\n' "$out" | tail -1)"); failed=1; fi

  local t row exe filter limit
  for t in "${PREBUILT_TESTS[@]}"; do
    IFS='|' read -r row exe filter limit <<<"$t"
    selected "$row" && run_gtest "$row" "$exe" "$filter" "$limit"
  done
  for t in "${PREBUILT_WORKLOADS[@]}"; do
    IFS='|' read -r row limit expect env args <<<"$t"
    selected "$row" && run_workload "$row" "$limit" "$expect" "$env" "$args"
  done
  for t in "${PREBUILT_BENCHES[@]}"; do
    IFS='|' read -r row limit <<<"$t"
    selected "$row" && run_bench "$row" "$limit"
  done
  echo; summary | tee "$summary_file"
  echo "summary: $summary_file; logs: $log_dir"
  exit $failed
}

case "${1:-}" in
  --pack) shift; pack_mode "$@" ;;
  --prebuilt) shift; prebuilt_mode "$@" ;;
  --build) shift; build_mode "$@" ;;
  -h|--help) sed -n '2,/^set -u/p' "$SELF" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) die "unknown option $1 (--build, --pack, --prebuilt; --help)" ;;
  *) build_mode "$@" ;;
esac
