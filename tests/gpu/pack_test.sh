#!/usr/bin/env bash
# ctest of tests/gpu/run_device_checks.sh's --pack / --prebuilt (label pack; tests/CMakeLists.txt):
#
#   pack_test.sh real BUILD_DIR   packs BUILD_DIR (zstd -9: about 2 s), then runs the pack's own copy
#                                 of the script with --prebuilt from a temp dir outside the source and
#                                 build trees. Without a device (this machine) every GPU row must
#                                 skip with cudaGetDeviceCount's answer, cupti_test pass, every
#                                 library not glibc's or CUDA's come from the pack, no log mention
#                                 the build or source tree, the summary file equal the printed
#                                 table, exit 0; then the same through the pack's glibc and
#                                 loader. Where a device is visible it exits 77 (skipped):
#                                 the whole suite would run; run --prebuilt by hand (docs/gpu.md).
#   pack_test.sh synthetic        a pack of stand-in executables (shell scripts that print what
#                                 gtest and Google Benchmark print): a crashed test resumed after,
#                                 failed / skipped counts and reasons, a filter that matches
#                                 nothing, a CUDA library not found, benchmark figures, a timeout and the
#                                 budget running out.
# Exit 0 when every assertion held; each failed assertion prints what it expected and the summary.
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPT=$HERE/run_device_checks.sh
mode=${1:?usage: pack_test.sh real BUILD_DIR | synthetic}
T=$(mktemp -d "${TMPDIR:-/tmp}/es-pack-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
bad=0

expect() {  # expect FILE REGEX WHAT : FILE has a line matching REGEX (extended)
  if ! grep -qE "$2" "$1"; then echo "FAIL: $3: no line of $(basename "$1") matches /$2/"; bad=1; fi
}

real_pack() {
  local build
  build=$(cd "$1" && pwd) || { echo "FAIL: no build dir $1"; exit 1; }
  if "$build/tests/cuda_devices" >/dev/null 2>&1; then
    echo "a CUDA device is visible: the packed suite would run in full; run --prebuilt by hand (docs/gpu.md 'Device checks')"
    exit 77
  fi
  EMBEDSCOPE_PACK_ZSTD_LEVEL=9 "$SCRIPT" --pack "$T/device.tar.zst" "$build" >"$T/pack.log" 2>&1
  local rc=$?
  cat "$T/pack.log"
  [ $rc -eq 0 ] || { echo "FAIL: --pack exited $rc"; exit 1; }
  local size
  size=$(stat -c %s "$T/device.tar.zst")
  [ "$size" -le $((32 * 1024 * 1024)) ] || { echo "FAIL: the pack is $size bytes, over 32 MiB"; bad=1; }
  # the script as a bare machine has it: the pack's own copy, run from a directory of its own
  mkdir -p "$T/bare/work"
  zstd -dc "$T/device.tar.zst" | tar -C "$T/bare" -xf - embedscope-device-pack/run_device_checks.sh
  cd "$T/bare/work" || exit 1
  env -u EMBEDSCOPE_TEST_DATA -u EMBEDSCOPE_CLI TMPDIR="$T/bare" \
    "$T/bare/embedscope-device-pack/run_device_checks.sh" --prebuilt "$T/device.tar.zst" summary.txt >out.txt 2>&1
  rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: --prebuilt exited $rc (0 expected: skips are no failures)"; bad=1; }
  local s=summary.txt
  [ -s $s ] || { echo "FAIL: no summary file"; cat out.txt; exit 1; }
  # the file holds exactly the table printed last
  sed -n '/^=== device checks summary/,$p' out.txt | grep -v '^summary: ' | diff -q - <(cat $s) >/dev/null \
    || { echo "FAIL: summary.txt differs from the printed summary"; bad=1; }
  expect $s "^unpack +ok +[0-9]+ +[0-9.]+ MiB in $T/bare/embedscope-prebuilt\." "unpacked under TMPDIR"
  expect $s '^glibc +system ' "the system's glibc runs the pack here (same glibc)"
  expect $s '^libraries +ok +[0-9]+ +[1-9][0-9]* from the pack; the device.s: .*libcudart\.so\.[0-9]+ \(' "libraries"
  expect $s '^devices +none +[0-9]+ +no CUDA device: cudaGetDeviceCount' "devices row names cudaGetDeviceCount's answer"
  expect $s '^engine_gpu_test +passed +[0-9]+ +[0-9]+ passed, 0 failed, [1-9][0-9]* skipped; skipped: no CUDA device: cudaGetDeviceCount' "engine_gpu_test"
  expect $s '^gpu_runtime_test +skipped +[0-9]+ +0 passed, 0 failed, [1-9][0-9]* skipped; skipped: needs 1 CUDA device\(s\): cudaGetDeviceCount' "gpu_runtime_test"
  expect $s '^cuda_executor_test +(none|skipped) ' "cuda_executor_test outside the cuda-executor row"
  expect $s '^cuda-executor +skipped +[0-9]+ +0 passed, 0 failed, [1-9][0-9]* skipped; skipped: .*CUDA device' "cuda-executor"
  expect $s '^cupti_test +passed +[0-9]+ +[1-9][0-9]* passed, 0 failed, 0 skipped$' "cupti_test runs without a device"
  expect $s '^bench_gpu_kernels +skipped +[0-9]+ +no figures: no CUDA device' "bench_gpu_kernels"
  expect $s '^bench_gpu_runtime +skipped +[0-9]+ +[1-9][0-9]* benchmarks, all: needs 1 CUDA device' "bench_gpu_runtime"
  # nothing but the pack line names the build or source tree: the tests ran from the pack alone.
  # GoogleTest's "FILE:LINE: Skipped" lines are left out: FILE is the compiler's __FILE__, a string
  # compiled in (it names the build tree only when the objects were compiled there, as on CI's
  # cold build), not a path the run opened
  local src gtest_location='^[^:]*\.(cpp|cu|h):[0-9]+: Skipped$'
  src=$(cd "$HERE/../.." && pwd)
  # the filter itself: CI's line (stop 40) is left out, a path a run opened is not
  printf '%s\n' "$build/tests/unity/engine_gpu_test/../../../../tests/engine/gpu_kernels_test.cpp:233: Skipped" \
    "$build/x.db: cannot open" | grep -vE "$gtest_location" | grep -qxF "$build/x.db: cannot open" &&
    [ "$(printf '%s\n' "$build/t/a.cpp:1: Skipped" | grep -cvE "$gtest_location")" = 0 ] ||
    { echo "FAIL: the GoogleTest-location filter"; bad=1; }
  if grep -rhF -e "$build" -e "$src" summary.logs out.txt | grep -v '^pack: ' | grep -vE "$gtest_location" | grep -q .; then
    echo "FAIL: a log names the build or source tree:"
    grep -rnF -e "$build" -e "$src" summary.logs out.txt | grep -v ':pack: ' | grep -vE ":[0-9]+:${gtest_location#^}" | head -5; bad=1
  fi
  [ -d "$T/bare/embedscope-prebuilt."* ] 2>/dev/null && { echo "FAIL: the temp dir was left behind"; bad=1; }
  # the same through the pack's own glibc and loader (what a device with an older glibc gets): the
  # rows checked below only; the CLI's 4-rank criteo run above is not repeated (19 s of the
  # test's 57, two ranks' CPU each)
  EMBEDSCOPE_DEVICE_CHECKS_ONLY='^(cupti_test|cuda-executor)$' EMBEDSCOPE_PREBUILT_GLIBC=pack TMPDIR="$T/bare" \
    "$T/bare/embedscope-device-pack/run_device_checks.sh" --prebuilt "$T/device.tar.zst" glibc.txt >out_glibc.txt 2>&1
  rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: --prebuilt with the pack's glibc exited $rc"; bad=1; }
  expect glibc.txt "^glibc +pack's +0 +the pack's [0-9.]+ through its loader" "the pack's glibc"
  expect glibc.txt '^libraries +ok +' "libraries, glibc's from the pack too"
  expect glibc.txt '^cupti_test +passed +[0-9]+ +[1-9][0-9]* passed, 0 failed, 0 skipped$' "cupti_test through the pack's loader"
  expect glibc.txt '^cuda-executor +skipped +[0-9]+ +0 passed, 0 failed, [1-9][0-9]* skipped; skipped: .*CUDA device' "cuda-executor through the pack's loader"
  [ $bad -eq 0 ] || cat $s glibc.txt
}

# a stand-in for a gtest executable: Fake.Passes, Fake.Crashes (SIGSEGV), Fake.Fails, Fake.Skips;
# honours the negative part of --gtest_filter (whole names), as run_gtest's resume writes it
write_fake_gtest() {
  cat >"$1" <<'SH'
#!/usr/bin/env bash
filter=""; for a; do case $a in --gtest_filter=*) filter=${a#--gtest_filter=} ;; esac; done
case $filter in -*) neg=${filter#-} ;; *-*) neg=${filter#*-} ;; *) neg="" ;; esac
case $filter in -*) ;; "*CudaEqualsReference*:*CudaExecutor*"*) echo "Running main()"; echo "[==========] 0 tests from 0 test suites ran. (0 ms total)"; exit 0 ;; esac
echo "Running main() from a stand-in"
n=0; rc=0
for t in Fake.Passes Fake.Crashes Fake.Fails Fake.Skips; do
  case ":$neg:" in *":$t:"*) continue ;; esac
  n=$((n + 1)); echo "[ RUN      ] $t"
  case $t in
    Fake.Passes) echo "[       OK ] $t (1 ms)" ;;
    Fake.Crashes) kill -SEGV $$ ;;
    Fake.Fails) echo "fake.cpp:1: Failure"; echo "[  FAILED  ] $t (2 ms)"; rc=1 ;;
    Fake.Skips) echo "fake.cpp:2: Skipped"; echo "needs 4 CUDA device(s): 1 visible"; echo "[  SKIPPED ] $t (0 ms)" ;;
  esac
done
echo "[==========] $n tests from 1 test suite ran. (5 ms total)"
exit $rc
SH
  chmod +x "$1"
}

synthetic() {
  local P=$T/src/embedscope-device-pack
  mkdir -p "$P/bin" "$P/lib" "$P/glibc" "$P/data" "$P/bench"
  printf 'made: by pack_test.sh\nglibc_required: 2.0\nglibc_packed: 2.0\ninterpreter: ld-linux-x86-64.so.2\ndevice_libs: libnotthere.so.1\nexecutables: stand-ins\n' >"$P/MANIFEST"
  printf '#!/bin/sh\necho "device 0: Stand-in H200"\n' >"$P/bin/cuda_devices"
  write_fake_gtest "$P/bin/engine_gpu_test"
  # passes everything; the executor row's filter matches nothing in engine_gpu_test's stand-in
  printf '#!/bin/sh\necho "[ RUN      ] Ok.One"; echo "[       OK ] Ok.One (3 ms)"\necho "[==========] 1 test from 1 test suite ran. (3 ms total)"\n' >"$P/bin/gpu_runtime_test"
  write_fake_gtest "$P/bin/cuda_executor_test"
  printf '#!/bin/sh\nexec sleep 100\n' >"$P/bin/cupti_test"      # run B: runs out of its limit
  cat >"$P/bin/bench_gpu_runtime" <<'SH'
#!/bin/sh
for a; do case $a in --benchmark_out=*) out=${a#--benchmark_out=} ;; esac; done
cat >"$out" <<'JSON'
{
  "benchmarks": [
    {
      "name": "BM_NcclAllReduce/8388608/manual_time",
      "run_name": "BM_NcclAllReduce/8388608/manual_time",
      "real_time": 1.5,
      "bus_bw_GBps": 123.5
    },
    {
      "name": "BM_NcclAllToAll/8388608/manual_time",
      "run_name": "BM_NcclAllToAll/8388608/manual_time",
      "error_occurred": true,
      "error_message": "needs 2 CUDA device(s): 1 visible"
    }
  ]
}
JSON
SH
  chmod +x "$P"/bin/*
  (cd "$T/src" && tar -cf - embedscope-device-pack | zstd -q -o "$T/fake.tar.zst")
  mkdir -p "$T/a" "$T/b"
  # run A: everything but the sleeping cupti_test, which gets a row of its own in run B
  cd "$T/a" || exit 1
  sed 's#^  "cupti_test|cupti_test|\*|30"$##' "$SCRIPT" >"$T/runner_a.sh"; chmod +x "$T/runner_a.sh"
  TMPDIR=$T "$T/runner_a.sh" --prebuilt "$T/fake.tar.zst" a.txt >out.txt 2>&1
  local rc=$?
  [ $rc -eq 1 ] || { echo "FAIL: run A exited $rc (1 expected: a test failed)"; bad=1; }
  local s=a.txt
  expect $s '^libraries +MISSING +0 +not found: libnotthere\.so\.1 \(set CUDA_HOME or LD_LIBRARY_PATH\)' "a CUDA library the device lacks"
  expect $s '^devices +1 GPU\(s\) +0 +Stand-in H200$' "devices"
  expect $s '^engine_gpu_test +FAILED \(crash\) +[0-9]+ +1 passed, 2 failed, 1 skipped; failed: Fake.Fails; crashed: Fake.Crashes \(exit 139\); skipped: needs 4 CUDA device\(s\): 1 visible$' "crash resumed"
  expect $s '^gpu_runtime_test +passed +[0-9]+ +1 passed, 0 failed, 0 skipped$' "passed"
  expect $s '^cuda-executor +none +[0-9]+ +no test matches the filter \*CudaEqualsReference\*:\*CudaExecutor\*$' "empty filter"
  expect $s '^bench_gpu_runtime +ran +[0-9]+ +2 benchmarks, 1 skipped \(first: needs 2 CUDA device\(s\): 1 visible\); figures below$' "bench row"
  expect $s '^BM_NcclAllReduce/8388608/manual_time: bus_bw_GBps=123.5$' "bench figures"
  expect $s '^BM_NcclAllToAll/8388608/manual_time: skipped/error: needs 2 CUDA device\(s\): 1 visible$' "bench error"
  expect $s '^bench_gpu_kernels +not built ' "a bench left out of the pack"
  # the resumed run skipped what had ended and the crashed test
  expect a.logs/engine_gpu_test.log.2 "^=== engine_gpu_test|^Running main" "a second attempt"
  grep -q "Fake.Passes" a.logs/engine_gpu_test.log.2 && { echo "FAIL: the resumed run ran Fake.Passes again"; bad=1; }
  [ $bad -eq 0 ] || cat $s
  # run B: a 24 s budget; cupti_test sleeps, is cut at what is left (24 - 15 reserved) and the rest is not run
  cd "$T/b" || exit 1
  sed 's#^  "engine_gpu_test|.*$##; s#^  "gpu_runtime_test|.*$##; s#^  "cuda_executor_test|.*$##; s#^  "cuda-executor|.*$##' \
    "$SCRIPT" >"$T/runner_b.sh"; chmod +x "$T/runner_b.sh"
  local t0=$SECONDS
  EMBEDSCOPE_DEVICE_CHECKS_BUDGET_S=24 TMPDIR=$T "$T/runner_b.sh" --prebuilt "$T/fake.tar.zst" b.txt >out.txt 2>&1
  rc=$?
  [ $rc -eq 1 ] || { echo "FAIL: run B exited $rc (1 expected)"; bad=1; }
  [ $((SECONDS - t0)) -le 24 ] || { echo "FAIL: run B took $((SECONDS - t0)) s, over its 24 s budget"; bad=1; }
  expect b.txt '^cupti_test +TIMEOUT +' "the sleeping test is cut"
  expect b.txt '^bench_gpu_runtime +NOT RUN \(budget\) ' "the budget runs out"
  [ $bad -eq 0 ] || cat b.txt
  # run C: only the rows EMBEDSCOPE_DEVICE_CHECKS_ONLY names (the crashing engine_gpu_test is left out)
  mkdir -p "$T/c" && cd "$T/c" || exit 1
  EMBEDSCOPE_DEVICE_CHECKS_ONLY='gpu_runtime|bench_gpu_runtime' TMPDIR=$T "$T/runner_a.sh" --prebuilt "$T/fake.tar.zst" c.txt >out.txt 2>&1
  rc=$?
  [ $rc -eq 1 ] || { echo "FAIL: run C exited $rc (1 expected: the missing library of run A)"; bad=1; }
  expect c.txt "^engine_gpu_test +not selected +0 +EMBEDSCOPE_DEVICE_CHECKS_ONLY='gpu_runtime\|bench_gpu_runtime'$" "a row left out"
  expect c.txt '^gpu_runtime_test +passed ' "a selected test row"
  expect c.txt '^bench_gpu_runtime +ran ' "a selected bench row"
  [ $bad -eq 0 ] || cat c.txt
  # a filter grep cannot read: exit 2 naming it, before anything runs
  EMBEDSCOPE_DEVICE_CHECKS_ONLY='cupti(' TMPDIR=$T "$T/runner_a.sh" --prebuilt "$T/fake.tar.zst" bad.txt >bad_out.txt 2>&1
  rc=$?
  [ $rc -eq 2 ] || { echo "FAIL: a bad EMBEDSCOPE_DEVICE_CHECKS_ONLY exited $rc (2 expected)"; bad=1; }
  expect bad_out.txt "EMBEDSCOPE_DEVICE_CHECKS_ONLY='cupti\\(' is not an extended regular expression" "a bad filter named"
}

case $mode in
  real) real_pack "${2:?usage: pack_test.sh real BUILD_DIR}" ;;
  synthetic) synthetic ;;
  *) echo "usage: pack_test.sh real BUILD_DIR | synthetic"; exit 2 ;;
esac
[ $bad -eq 0 ] && echo "pack_test $mode: every check held"
exit $bad
