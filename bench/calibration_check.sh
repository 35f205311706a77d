#!/usr/bin/env bash
# Issue 15's calibration accuracy check: `this_machine` fitted by `embedscope calibrate` on one
# set of measured cpu runs, then every held-out run simulated with that profile; prints per
# held-out configuration the ratio simulated / measured of the median step time (slowest rank)
# and of the collectives' time (Gloo: each call's last member's end after its last arrival), per repetition and their
# spread. The goal (issue 15): step time within 15% (ratio 0.85..1.15) on every held-out run.
#
#   fit (calibration set): criteo_kaggle, base pipeline, table_wise and row_wise, 2 and 4 ranks
#   held out (never in the fit): 8 ranks table_wise / row_wise (another rank count), 4 ranks
#     column_wise and 2 ranks column_wise (another sharding type), 4 ranks table_wise with the
#     sparse_dist and semi_sync pipelines, 4 ranks table_wise over an emulated 1 GB/s network
#     (--network-bandwidth 1e9), and mlperf_dlrm_dcnv2_scaled on 4 ranks (another preset: DCN).
#
# Runs are interleaved: REPS sets (default 3) of every configuration, each set fitted and
# checked on its own, so the spread between sets shows the shared machine's load (uptime is
# printed before every set). Needs about 3.5 GB of memory (the mlperf run) and ~2 minutes a
# set on 2 idle cores. Usage: bench/calibration_check.sh (BIN, REPS, STEPS, OUT optional;
# SKIP_RUNS=1 reuses the sessions already in OUT).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/app/cli/embedscope}
REPS=${REPS:-3}
STEPS=${STEPS:-10}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "sessions in $OUT; $(nproc) cores"

# name | embedscope run arguments
FIT=(
  "tw2|--preset criteo_kaggle --devices 2 --sharding table_wise"
  "rw2|--preset criteo_kaggle --devices 2 --sharding row_wise"
  "tw4|--preset criteo_kaggle --devices 4 --sharding table_wise"
  "rw4|--preset criteo_kaggle --devices 4 --sharding row_wise"
)
HELD=(
  "tw8|--preset criteo_kaggle --devices 8 --sharding table_wise"
  "rw8|--preset criteo_kaggle --devices 8 --sharding row_wise"
  "cw4|--preset criteo_kaggle --devices 4 --sharding column_wise"
  "cw2|--preset criteo_kaggle --devices 2 --sharding column_wise"
  "tw4_sparse_dist|--preset criteo_kaggle --devices 4 --sharding table_wise --pipeline sparse_dist"
  "tw4_semi_sync|--preset criteo_kaggle --devices 4 --sharding table_wise --pipeline semi_sync"
  "tw4_net1GBps|--preset criteo_kaggle --devices 4 --sharding table_wise --network-bandwidth 1e9"
  "dcnv2_tw4|--preset mlperf_dlrm_dcnv2_scaled --devices 4 --sharding table_wise --steps 4"
)

run_one() {  # set, "name|args"
  local name=${2%%|*} args=${2#*|}
  [[ $args == *--steps* ]] || args="$args --steps $STEPS"
  # shellcheck disable=SC2086
  "$BIN" run $args -o "$OUT/s$1_$name.db" --force-overwrite \
    > "$OUT/s$1_$name.log" 2>&1 || { echo "run $name failed:"; tail -5 "$OUT/s$1_$name.log"; exit 1; }
}

if [[ "${SKIP_RUNS:-0}" != 1 ]]; then
  for s in $(seq 1 "$REPS"); do
    echo "set $s: $(uptime)"
    for c in "${FIT[@]}" "${HELD[@]}"; do run_one "$s" "$c"; done
  done
fi

for s in $(seq 1 "$REPS"); do
  fit=() held=()
  for c in "${FIT[@]}"; do fit+=("$OUT/s${s}_${c%%|*}.db"); done
  for c in "${HELD[@]}"; do held+=("$OUT/s${s}_${c%%|*}.db"); done
  "$BIN" calibrate "${fit[@]}" --check "${held[@]}" -o "$OUT/this_machine_s$s.json" --json > "$OUT/check_s$s.json"
done

python3 - "$OUT" "$REPS" <<'PY'
import json, sys, statistics
out, reps = sys.argv[1], int(sys.argv[2])
rows = {}
for s in range(1, reps + 1):
    j = json.load(open(f"{out}/check_s{s}.json"))
    cpu = j["profile"].get("cpu", {})
    print(f"set {s} profile: cores {cpu.get('cores')}, other_groups {cpu.get('other_groups', 0):.2f}, background_threads {cpu.get('background_threads', 0):.2f} "
          f"({'measured' if j.get('background_measured') else 'fitted'}), step scale {j.get('step_scale', 1):.3f}, "
          f"launch {j['profile']['gpu']['kernel_launch_ns']} ns")
    for c in j["checks"]:
        name = c["session"].split("/")[-1][len(f"s{s}_"):-3]
        r = rows.setdefault(name, {"in": c["in_sample"], "step": [], "comm": [], "ms": [], "load": [], "b": []})
        r["step"].append(c["simulated_step_ns"] / c["measured_step_ns"])
        if c.get("simulated_at_run_load_ns", 0) > 0:
            r["load"].append(c["simulated_at_run_load_ns"] / c["measured_step_ns"])
            r["b"].append(c.get("other_groups", -1))
        r["ms"].append(c["measured_step_ns"] / 1e6)
        if c.get("measured_comm_ns", 0) > 0:
            r["comm"].append(c["simulated_comm_ns"] / c["measured_comm_ns"])
def cell(v):
    return ' '.join(f'{x:.2f}' for x in v) if v else '-'
def med(v):
    return f"{statistics.median(v):6.2f}" if v else "     -"
print(f"\n{'config':<16} {'kind':<9} {'meas. ms':>8}  {'step ratio per set':<16} {'median':>6} {'goal':>4}  "
      f"{'at run load':<16} {'median':>6} {'goal':>4}  {'run G':<16}  {'comm ratio':<16} {'median':>6}")
met = met_load = True
for name, r in rows.items():
    m = statistics.median(r["step"])
    ok = 0.85 <= m <= 1.15
    ml = statistics.median(r["load"]) if r["load"] else None
    okl = ml is not None and 0.85 <= ml <= 1.15
    if not r["in"]:
        met &= ok
        met_load &= okl
    print(f"{name:<16} {'in-sample' if r['in'] else 'held-out':<9} {statistics.median(r['ms']):8.1f}  "
          f"{cell(r['step']):<16} {m:6.2f} {('met' if ok else 'NOT'):>4}  {cell(r['load']):<16} {med(r['load'])} "
          f"{('-' if ml is None else 'met' if okl else 'NOT'):>4}  {' '.join(f'{x:.2f}' for x in r['b']) or '-':<16}  "
          f"{cell(r['comm']):<16} {med(r['comm'])}")
print(f"\nratio = simulated / measured (median step time, slowest rank; per set, then the median of the sets); "
      f"'at run load': simulated with the run's own measured load (run G: other task groups, cpu_other_cores / "
      f"cpu_self_cores) instead of the profile's; comm: the collectives' time per step.\ngoal 0.85..1.15 on every held-out config: "
      f"{'met' if met else 'NOT met'} with the profile's background, {'met' if met_load else 'NOT met'} at each "
      f"run's measured load")
PY
