#!/usr/bin/env bash
# Runs the libFuzzer targets of a fuzz build (-DEMBEDSCOPE_FUZZ=ON) for a while each, seeded
# from the committed fixtures, and fails when any target finds a crash, a sanitizer report, a
# leak, a timeout or an out-of-memory.
#
#   tests/fuzz/run_fuzzers.sh BUILD_DIR [SECONDS_PER_TARGET=60] [JOBS=2] [TARGET ...]
#
# The targets and their seeds come from BUILD_DIR/fuzz_targets.txt (tests/fuzz/CMakeLists.txt
# writes it). Each target gets BUILD_DIR/fuzz-work/NAME/: corpus/ (the seeds copied, plus what
# the run adds; kept between runs, so a longer second run continues), NAME.log, and any
# crash-*, leak-*, timeout-*, oom-* input it finds. Reproduce one with `BINARY INPUT`; commit it
# as a regression fixture under tests/data/fuzz/NAME/ (a seed of later runs) with a unit test.
# JOBS targets run at a time (libFuzzer is single-threaded: one core each).
set -uo pipefail
build=${1:?usage: run_fuzzers.sh BUILD_DIR [SECONDS] [JOBS] [TARGET ...]}
seconds=${2:-60}
jobs=${3:-2}
shift $(( $# < 3 ? $# : 3 ))
list="$build/fuzz_targets.txt"
[[ -f $list ]] || { echo "run_fuzzers: $list missing: configure $build with -DEMBEDSCOPE_FUZZ=ON" >&2; exit 2; }
work="$build/fuzz-work"
mkdir -p "$work"
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# The targets' temp files (inputs written out, sessions imported into): on tmpfs where there is
# one, so that a session's fsyncs cost nothing.
if [[ -d /dev/shm && -w /dev/shm ]]; then export TMPDIR=$(mktemp -d /dev/shm/embedscope-fuzz.XXXXXX)
else export TMPDIR=$(mktemp -d "$work/tmp.XXXXXX"); fi
trap 'rm -rf "$TMPDIR"' EXIT

run_one() {  # name binary seeds
  local name=$1 bin=$2 seeds=$3 dir="$work/$1"
  mkdir -p "$dir/corpus" "$dir/previous"
  # findings of an earlier run go to previous/, so what is left beside the log is this run's
  find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \
       -o -name 'slow-unit-*' \) -exec mv -f {} "$dir/previous/" \;
  local IFS='|'
  for s in $seeds; do
    if [[ -d $s ]]; then find "$s" -type f ! -name '*.py' ! -name '*.md' -exec cp -f {} "$dir/corpus/" \;
    elif [[ -f $s ]]; then cp -f "$s" "$dir/corpus/"; fi
  done
  unset IFS
  # 25 s per input at most, 2 GiB of RSS, 1 GiB in one malloc: beyond those an input is a finding.
  "$bin" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
         -print_final_stats=1 -artifact_prefix="$dir/" "$dir/corpus" >"$dir/$name.log" 2>&1
  echo $? >"$dir/rc"
}

declare -a names=()
while IFS=$'\t' read -r name bin seeds; do
  [[ -n $name ]] || continue
  if (( $# )) && [[ ! " $* " == *" $name "* ]]; then continue; fi
  [[ -x $bin ]] || { echo "run_fuzzers: $bin not built (cmake --build $build --target embedscope_fuzz)" >&2; exit 2; }
  while (( $(jobs -rp | wc -l) >= jobs )); do wait -n; done
  echo "fuzz: $name for ${seconds}s" >&2
  rm -f "$work/$name/rc"
  run_one "$name" "$bin" "$seeds" &
  names+=("$name")
done <"$list"
wait

failed=0
printf '%-22s %6s %10s %8s %7s  %s\n' target rc execs exec/s corpus result
for name in "${names[@]}"; do
  dir="$work/$name"
  rc=$(cat "$dir/rc" 2>/dev/null || echo 99)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/$name.log" | grep -o '[0-9]*$' | tail -1)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$dir/$name.log" | grep -o '[0-9]*$' | tail -1)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  found=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | head -1)
  result=ok
  if [[ $rc != 0 ]]; then result="FAILED ${found:-see $dir/$name.log}"; failed=1; fi
  printf '%-22s %6s %10s %8s %7s  %s\n' "$name" "$rc" "${execs:-?}" "${speed:-?}" "$corpus" "$result"
done
if (( failed )); then
  for name in "${names[@]}"; do
    dir="$work/$name"
    if [[ $(cat "$dir/rc" 2>/dev/null) != 0 ]]; then
      echo "---- $name: last lines of $dir/$name.log" >&2
      tail -40 "$dir/$name.log" >&2
    fi
  done
  echo "fuzz: FAILED (inputs above; reproduce with the target's binary and the input file)" >&2
  exit 1
fi
echo "fuzz: ${#names[@]} targets, ${seconds}s each, no crash" >&2
