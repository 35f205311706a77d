#!/usr/bin/env bash
# The compression study of issue 16 (first slice): criteo_kaggle on 4 CPU ranks, seed 1, the
# same steps (STEPS, default 20); tables stored fp32 / fp16 / bf16 / int8 / int4 (stochastic
# rounding, its default), int4_rtn (int4 rounded to nearest), fp16_sr (fp16 with stochastic
# rounding), and hash_size = ceil(rows / 10) in fp32. VARIANTS (space-separated) picks a subset. Prints table bytes per rank, peak memory, loss, the stored rows'
# error and hash collisions per step. Needs about 6 GB of host memory (the fp32 run: 2.2 GB of
# tables plus the ranks' buffers). Usage: bench/compression_study.sh (BIN, STEPS, OUT optional).
#
# STUDY=tradeoffs runs instead the five runs of the scenario resources/scenarios/
# compression.json (8 tables of 100,000 x 32, Adam, 4 ranks: fp32, fp16 rows, int8
# rows, hash_size 10x fewer rows, fp16 rows with bf16 optimizer state, low_rank_dim 8 and 4,
# shared pairs: t1 shared_with t0, ...), each for STEPS measured
# steps, and prints per run the bytes of rows and of optimizer state on the busiest rank, the
# peak, the mean step time, the loss and the stored rows' error (about 1.5 GB of host memory;
# low-rank factors are fp32, so their stored error is 0: what the factorization costs shows in
# the loss).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/app/cli/embedscope}
STEPS=${STEPS:-20}
OUT=${OUT:-$(mktemp -d)}
if [ "${STUDY:-criteo}" = tradeoffs ]; then
  SC=$ROOT/resources/scenarios/compression.json
  n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"]))' "$SC")
  for ((i = 0; i < n; i++)); do
    python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["runs"][int(sys.argv[2])]["workload"]))' \
      "$SC" "$i" > "$OUT/run$i.json"
    "$BIN" run "$OUT/run$i.json" --steps "$STEPS" -o "$OUT/run$i.db" --force-overwrite --json > "$OUT/run$i.out.json"
  done
  python3 - "$OUT" "$SC" <<'PY'
import json, sys
out, sc = sys.argv[1], json.load(open(sys.argv[2]))
print(f"{'run':<30} {'rows/rank':>11} {'state/rank':>11} {'peak/rank':>11} {'step ms':>8} {'loss first':>10} {'loss last':>10} {'rows rel err':>12} {'collisions/step':>15}")
for i, r in enumerate(sc["runs"]):
    j = json.load(open(f"{out}/run{i}.out.json"))
    W = j["world_size"]
    rows = max(sum(t["weight_bytes"][k] for t in j["tables"]) for k in range(W))
    state = max(sum(t["optimizer_state_bytes"][k] for t in j["tables"]) for k in range(W))
    peak = max(k["memory_bytes"] for k in j["ranks"])
    rel = max(t["relative_error"] for t in j["tables"])
    coll = sum(t["hash_collisions"] for t in j["tables"]) / j["steps"]
    print(f"{r['label']:<30} {rows/2**20:>7.1f} MiB {state/2**20:>7.1f} MiB {peak/2**20:>7.1f} MiB {j['step_time_ns']['mean']/1e6:>8.0f} {j['loss_first']:>10.4f} {j['loss_last']:>10.4f} {rel:>12.3g} {coll:>15.1f}")
PY
  exit 0
fi
WL=$ROOT/resources/workloads/criteo_kaggle.json
VARIANTS=${VARIANTS:-fp32 fp16 bf16 int8 int4 int4_rtn fp16_sr hash10}
for v in $VARIANTS; do
  python3 - "$WL" "$v" > "$OUT/$v.json" <<'PY'
import json, math, sys
j = json.load(open(sys.argv[1])); v = sys.argv[2]
j["name"] = "criteo_kaggle_" + v
for t in j["tables"]:
    if v == "hash10": t["hash_size"] = max(1, math.ceil(t["num_embeddings"] / 10))
    elif v == "int4_rtn": t["data_type"], t["stochastic_rounding"] = "int4", False
    elif v == "fp16_sr": t["data_type"], t["stochastic_rounding"] = "fp16", True
    elif v != "fp32": t["data_type"] = v
print(json.dumps(j))
PY
  "$BIN" run "$OUT/$v.json" --devices 4 --steps "$STEPS" -o "$OUT/$v.db" --force-overwrite --json > "$OUT/$v.out.json"
done
python3 - "$OUT" $VARIANTS <<'PY'
import json, sys
out = sys.argv[1]
print(f"{'variant':<8} {'table bytes/rank (max)':>22} {'table bytes total':>18} {'peak/rank (max)':>16} {'loss first':>10} {'loss last':>10} {'max rel err':>11} {'collisions/step':>15} {'step ms':>8}")
for v in sys.argv[2:]:
    j = json.load(open(f"{out}/{v}.out.json"))
    W = j["world_size"]
    per_rank = [sum(t["weight_bytes"][r] for t in j["tables"]) for r in range(W)]
    rel = max(t["relative_error"] for t in j["tables"])
    coll = sum(t["hash_collisions"] for t in j["tables"]) / j["steps"]
    peak = max(r["memory_bytes"] for r in j["ranks"])
    print(f"{v:<8} {max(per_rank)/2**20:>19.1f} MiB {sum(per_rank)/2**20:>14.1f} MiB {peak/2**20:>12.1f} MiB {j['loss_first']:>10.4f} {j['loss_last']:>10.4f} {rel:>11.3g} {coll:>15.1f} {j['step_time_ns']['mean']/1e6:>8.0f}")
PY
